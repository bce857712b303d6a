"""The pytest run: items, the controller (deferred verdicts), coverage, the cache, config."""
