"""The audit engine: one part of one file -> its records -> every check -> its summary.

passes.py is the entry; kernel.py the audit core, fed by columnar.py (JSONL chunks), arrow.py
(Parquet, Arrow IPC batches) and dicts.py (the API's dicts); plain.py the per-line path."""
