#!/usr/bin/env python3
"""Record what NVML and sysfs answer on this node, for tests that replay it without GPUs.

Runs `discover` through a Recorder around the live NVML backend and writes $OUT/nvml_h200x2.json (or
./nvml_h200x2.json without OUT): the recorded NVML calls, the sysfs files discovery reads (or their absence),
and CUDA's own multicast attribute per GPU (read with cuDeviceGetAttribute only; nothing is created or
enabled). Prints the decoded Discovery and the health flags. Read-only: no clocks, power, resets or multicast.

Usage:  python3 benchmarks/probe/capture_nvml.py        (copy the file to tests/data/h200x2/nvml.json)

On the GPU node `pip install -e .` fails offline (build isolation wants setuptools from an index), so the
recording in tests/data/h200x2/ was made with pkroof put on the path through a folder of links instead:
    S=/tmp/pkshim; mkdir -p $S/pkroof && cp pkroof/__init__.py $S/pkroof/ &&
    for d in rooflines topology profilers kernels reports; do ln -s $PWD/$d $S/pkroof/$d; done
    PYTHONPATH=$S python3 benchmarks/probe/capture_nvml.py
"""

from __future__ import annotations

import ctypes
import dataclasses
import datetime
import json
import os
import platform
from pathlib import Path

from pkroof.runtime.nvml import NA, Nvml, Recorder
from pkroof.topology.discover import discover, health, sysfs_bus_id

CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED = 132  # cuda.h CUdevice_attribute
CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED = 128


def _cuda_multicast() -> dict:
    """cuDeviceGetAttribute(MULTICAST_SUPPORTED) per GPU: an attribute read, no context, no multicast object."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return {"error": str(e)}
    if rc := cuda.cuInit(0):
        return {"error": f"cuInit: CUresult {rc}"}
    count = ctypes.c_int()
    cuda.cuDeviceGetCount(ctypes.byref(count))
    out = {}
    for i in range(count.value):
        dev, value, fabric = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        cuda.cuDeviceGet(ctypes.byref(dev), i)
        rc = cuda.cuDeviceGetAttribute(ctypes.byref(value), CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, dev)
        rc2 = cuda.cuDeviceGetAttribute(ctypes.byref(fabric), CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, dev)
        out[f"gpu{i}"] = {
            "multicast_supported": value.value if rc == 0 else f"CUresult {rc}",
            "handle_type_fabric_supported": fabric.value if rc2 == 0 else f"CUresult {rc2}",
        }
    return out


def _sysfs(bus_ids: list[str]) -> dict:
    """The sysfs files discovery reads: path → content, or None where absent."""
    root = Path("/sys")
    paths = [root / "module/nvidia_peermem", root / "module/nv_peer_mem", root / "class/infiniband"]
    paths += [root / "bus/pci/devices" / b / "numa_node" for b in bus_ids]
    paths += sorted((root / "class/infiniband").glob("*/ports/*/*"))
    out: dict[str, str | list[str] | None] = {}
    for path in paths:
        if path.is_dir():
            out[str(path)] = sorted(p.name for p in path.iterdir())
        elif path.name in ("numa_node", "rate", "state", "link_layer") and path.exists():
            out[str(path)] = path.read_text()
        elif not path.exists():
            out[str(path)] = None
    return out


def _show(value: object) -> object:
    if isinstance(value, NA):
        return f"NA ({value.reason})"
    if dataclasses.is_dataclass(value):
        return {f.name: _show(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_show(v) for v in value]
    if isinstance(value, dict):
        return {k: _show(v) for k, v in value.items()}
    return value


def main() -> None:
    import pynvml

    recorder = Recorder(Nvml())
    found = discover(recorder)
    bus_ids = [g.pci_bus_id for g in found.gpus if not isinstance(g.pci_bus_id, NA)]
    sysfs_ids = [sysfs_bus_id(b) for b in bus_ids]
    recording = recorder.recording(
        captured=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        pynvml=getattr(pynvml, "__version__", "?"),
        python=platform.python_version(),
        command="python3 benchmarks/probe/capture_nvml.py",
    )
    recording["sysfs"] = _sysfs(sysfs_ids)
    recording["cuda"] = _cuda_multicast()
    out = Path(os.environ.get("OUT", ".")) / "nvml_h200x2.json"
    out.write_text(json.dumps(recording, indent=1, sort_keys=True) + "\n")

    shown = _show(found)
    for gpu in shown["gpus"]:
        links = gpu.pop("nvlinks")
        gpu["nvlinks (distinct, link number dropped)"] = sorted(
            {json.dumps({k: v for k, v in link.items() if k != "link"}, sort_keys=True) for link in links}
        )
        gpu["nvlinks answered"] = [link["link"] for link in links]
    print(json.dumps(shown, indent=1))
    print("cuda:", json.dumps(recording["cuda"]))
    print("sysfs:", json.dumps(recording["sysfs"]))
    print(f"{len(recording['calls'])} calls recorded; NA answers by function:")
    na: dict[str, set[str]] = {}
    for key, answer in recording["calls"].items():
        if "na" in answer:
            na.setdefault(key.split("(")[0], set()).add(answer["na"])
    for name, reasons in sorted(na.items()):
        print(f"  {name}: {sorted(reasons)}")
    print("health flags:", *(health(found) or ["none"]), sep="\n  ")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
