#!/usr/bin/env bash
# The probe's evidence on the 2xH200 node, in one device call: GPU tests, a full and a quick probe, plain PyTorch
# beside it, and the multi-node path rehearsed on one node (two torchrun "nodes" of one GPU each, NCCL forced
# off peer-to-peer and shared memory so its traffic takes the network transport). Writes everything to $OUT.
set -u
export PYTHONUNBUFFERED=1 TIMEFORMAT='%R s wall'
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v WARNING | tail -2
python3 -m pytest -q -p no:cacheprovider tests/test_probe_gpu.py > "$OUT/gpu-tests.log" 2>&1; tail -2 "$OUT/gpu-tests.log"
{ time python3 -m pkroof probe --name h200x2 --out "$OUT/h200x2.json" > "$OUT/full.log" 2>&1 ; } 2>> "$OUT/full.log"
{ time python3 -m pkroof probe --quick --name h200x2 --out /tmp/quick.json > "$OUT/quick.log" 2>&1 ; } 2>> "$OUT/quick.log"
grep -E "wrote|wall" "$OUT/full.log" "$OUT/quick.log"
timeout 150 python3 benchmarks/plain_torch_h200x2.py --variants > "$OUT/plain.log" 2>&1; tail -30 "$OUT/plain.log"
run_node() {  # $1: node rank (and its one GPU), $2: output file
    CUDA_VISIBLE_DEVICES=$1 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 timeout 150 python3 -m torch.distributed.run \
        --nnodes 2 --node-rank "$1" --nproc-per-node 1 --master-addr 127.0.0.1 --master-port 29611 \
        -m pkroof probe --quick --name rehearsal-2x1 --out "$2"
}
run_node 1 /tmp/rehearsal-node1.json > "$OUT/rehearsal-node1.log" 2>&1 &
run_node 0 "$OUT/rehearsal.json" > "$OUT/rehearsal-node0.log" 2>&1
wait
tail -12 "$OUT/rehearsal-node0.log"; tail -3 "$OUT/rehearsal-node1.log"; date -u
