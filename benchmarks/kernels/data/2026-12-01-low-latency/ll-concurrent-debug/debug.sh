set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v WARNING | tail -2
cd tests
one() { echo "=== $1"; shift; timeout 60 python3 -c "$*" 2>&1 | grep -v Warning | tail -3; echo "rc ${PIPESTATUS[0]}"; }
one "LL eager 256KiB ctas128" "from emulate_ll import emulate_concurrent as e; e(2, 131072, 'bfloat16', 128); print('ok')"
one "LL graph 256KiB ctas128" "from emulate_ll import emulate_concurrent as e; e(2, 131072, 'bfloat16', 128, graph=True); print('ok')"
one "LL graph 256KiB ctas64" "from emulate_ll import emulate_concurrent as e; e(2, 131072, 'bfloat16', 64, graph=True); print('ok')"
one "LL graph 64KiB ctas128" "from emulate_ll import emulate_concurrent as e; e(2, 32768, 'bfloat16', 128, graph=True); print('ok')"
one "LL graph 128KiB ctas128" "from emulate_ll import emulate_concurrent as e; e(2, 65536, 'bfloat16', 128, graph=True); print('ok')"
one "LL eager calls=2 256KiB" "from emulate_ll import emulate_concurrent as e; e(2, 131072, 'bfloat16', 128, calls=2); print('ok')"
cd ..
for only in ll push; do echo "=== ll_local $only"; timeout 60 python3 benchmarks/ll_local.py --ctas 64 --sizes 65536,262144,1048576 --only $only 2>&1 | grep -v -e Warning -e '^  ' | tail -6; done
echo "=== sanitizer LL eager 256KiB"
cd tests && timeout 150 compute-sanitizer --tool memcheck --print-limit 5 python3 -c "from emulate_ll import emulate_concurrent as e; e(2, 131072, 'bfloat16', 128, calls=2); print('ok')" 2>&1 | grep -v Warning | head -40
