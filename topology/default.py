"""The one default topology of every command and of the Python API: this node's, where it was saved, else a preset.

In order: `$PKROOF_TOPOLOGY` (a preset name or a topology file), else the file `pkroof probe --save` wrote
(`$XDG_CONFIG_HOME/pkroof/topology.json`, by default `~/.config/pkroof/topology.json`), else PRESET.
"""

from __future__ import annotations

import os
from pathlib import Path

PRESET = "hgx-h100-8"  # the default where no topology of this node was saved
ENV = "PKROOF_TOPOLOGY"


def saved_path() -> Path:
    """Where `pkroof probe --save` writes this node's topology, and where the default looks for it."""
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "pkroof" / "topology.json"


def default_topology() -> str:
    """The topology a command uses when given none: $PKROOF_TOPOLOGY, else the saved probe, else PRESET."""
    named = os.environ.get(ENV, "").strip()
    if named:
        return named
    saved = saved_path()
    return str(saved) if saved.is_file() else PRESET


def default_said() -> str:
    """One line saying which default is in use and why (for logs that bound against it)."""
    named = os.environ.get(ENV, "").strip()
    if named:
        return f"{named} (from ${ENV})"
    saved = saved_path()
    if saved.is_file():
        return f"{saved} (this node, saved by pkroof probe --save)"
    return f"{PRESET} (the default preset; `pkroof probe --save` makes this node's topology the default)"
