"""A process with Triton's interpreter chosen before triton compiles anything, that runs emulation cases on request:
one JSON line in ({"module": "emulate", "function": ..., "kwargs": {...}}), one JSON line out ({"ok": true} or
{"ok": false, "error": the traceback}). tests/test_kernels_cpu.py keeps one such process for all its cases, each
case its own test."""

import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(__file__))

from emulate import interpreter_setup


def main() -> int:
    interpreter_setup()
    import importlib

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        case = json.loads(line)
        try:
            importlib.import_module(case["module"]).run_case(case["function"], case["kwargs"])
            answer = {"ok": True}
        except BaseException:
            answer = {"ok": False, "error": traceback.format_exc()[-4000:]}
        print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
