"""Tokenizers loaded from local directories (hf.py): no knowledge of records or formats."""
