"""pkroof: how fast could this multi-GPU kernel be on this node, how fast is it, and what to change first."""

__version__ = "0.1.0"
