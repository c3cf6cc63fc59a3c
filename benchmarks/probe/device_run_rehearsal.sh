#!/usr/bin/env bash
# Plain PyTorch beside the probe (with the small all-reduce A/B variants), then the multi-node path rehearsed on
# one node: two torchrun "nodes" of one GPU each, NCCL forced off peer-to-peer and shared memory so its traffic
# takes the network transport. Writes to $OUT.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v WARNING | tail -2  # again: may run alone
timeout 150 python3 benchmarks/probe/plain_torch_baseline.py --variants > "$OUT/plain.log" 2>&1; grep -v Warning "$OUT/plain.log" | tail -24
run_node() {  # $1: node rank (and its one GPU), $2: output file
    CUDA_VISIBLE_DEVICES=$1 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 timeout 150 python3 -m torch.distributed.run \
        --nnodes 2 --node-rank "$1" --nproc-per-node 1 --master-addr 127.0.0.1 --master-port 29611 \
        -m pkroof probe --quick --name rehearsal-2x1 --out "$2"
}
run_node 1 /tmp/rehearsal-node1.json > "$OUT/rehearsal-node1.log" 2>&1 &
run_node 0 "$OUT/rehearsal.json" > "$OUT/rehearsal-node0.log" 2>&1
wait
tail -12 "$OUT/rehearsal-node0.log"; tail -3 "$OUT/rehearsal-node1.log"; date -u
