"""Measurement records: the versioned, strictly read JSON-lines format (format.py), the model's view of a record,
computed whenever records are read (evaluate.py), and what `pkroof report` shows of them: the typed data of its
pages (report_data.py), gathered from records and a topology (report_inputs.py)."""
