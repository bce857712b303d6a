"""The base layer: small helpers every layer may use; no knowledge of pytest items or formats."""
