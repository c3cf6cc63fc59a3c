"""Measurement records: the versioned, strictly read JSON-lines format (format.py) and the model's view of a
record, computed whenever records are read (evaluate.py)."""
