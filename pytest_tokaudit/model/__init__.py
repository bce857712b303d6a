"""The model: the contract, summaries, records, outcomes and the run result.

Values only: no pytest collection, no file reading; every layer above reads them."""
