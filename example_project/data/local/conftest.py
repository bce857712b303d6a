"""Local runs: not billed (no provider), counted by a local tokenizer, so audited looser."""


def pytest_tokaudit_contract(path, contract):
    return contract.replace(where=(), count_abs=32, count_mean_rel=0.05)
