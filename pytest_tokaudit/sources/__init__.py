"""Record sources: one module per format or store, each a SOURCE object (see base/formats.py).

A source owns what is format-specific: its parts (shards), its records or batches, its
cache fingerprint and its progress unit. Nothing here knows pytest's collection."""
