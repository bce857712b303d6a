"""The audit engine: one part of one file -> its records -> every check -> its summary.

passes.py is the entry; kernel.py the one audit core (the count and structure rules over a
batch, the bulk fold, the hook calls), fed by columnar.py (JSONL chunks), arrow.py (Parquet
and Arrow IPC record batches) and dicts.py (the API's dicts); plain.py the per-line path,
for what they hand on."""
