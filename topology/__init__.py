"""Topology: the data model, its JSON file, and the embedded presets."""

from .files import SCHEMA, TopologyError, dump, dumps, from_dict, load, to_dict
from .model import GPU, NIC, CollectiveFit, MechanismSpec, ScaleUp, Source, Topology, default_nic
from .presets import PRESETS, preset, resolve

__all__ = [
    "GPU",
    "NIC",
    "PRESETS",
    "SCHEMA",
    "CollectiveFit",
    "MechanismSpec",
    "ScaleUp",
    "Source",
    "Topology",
    "TopologyError",
    "default_nic",
    "dump",
    "dumps",
    "from_dict",
    "load",
    "preset",
    "resolve",
    "to_dict",
]
