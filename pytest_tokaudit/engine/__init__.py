"""The audit engine: one part of one file -> its records -> every check -> its summary.

passes.py is the entry; plain.py the per-line path, columnar.py the vectorised JSONL path
held to it, arrow.py the pass over a columnar source's batches."""
