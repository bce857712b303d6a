"""Contract values: parsing, where they came from, and the JSON form reports carry."""

from __future__ import annotations

import pytest

from pytest_tokaudit.model.contract import KEYS, Allowance, Contract, ContractError
from pytest_tokaudit.model.values import parse_allowance, parse_rel
DEFAULT = Contract(**{k.attr: k.parse(k.default) for k in KEYS})


@pytest.mark.parametrize("text, value", [("2%", 0.02), ("0.02", 0.02), (" 0.5% ", 0.005), ("0", 0.0)])
def test_shares_accept_a_fraction_or_a_percentage(text, value):
    assert parse_rel(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["lots", "-1%", "nan", "inf", "2 %%"])
def test_bad_shares_say_what_to_write(text):
    with pytest.raises(ContractError, match="expected"):
        parse_rel(text)


def test_outlier_allowance_is_a_count_or_a_share_rounded_down():
    assert parse_allowance("3") == Allowance(3, relative=False)
    assert parse_allowance("3").of(1000) == 3
    assert parse_allowance("0.5%").of(1000) == 5
    assert parse_allowance("0.5%").of(199) == 0  # 0.995 allows none
    assert str(parse_allowance("0.5%")) == "0.5%"
    with pytest.raises(ContractError, match="a count like 3 or a share like 0.5%"):
        parse_allowance("many")


def test_adjusted_values_name_the_hook_as_their_source():
    c = DEFAULT.replace(count_abs=16, count_mean_rel=0.05, where=("meta", "provider"),
                        price_per_mtok=2.5)
    assert c.describe(("count_abs", "count_rel", "count_mean_rel", "where", "price_per_mtok")) == (
        "pytest_tokaudit_contract [tokaudit_count_abs = 16, tokaudit_count_mean_rel = 5%, "
        "tokaudit_where = meta.provider, tokaudit_price_per_mtok = 2.5]; "
        "default [tokaudit_count_rel = 2%]"
    )


def test_json_form_round_trips():
    c = DEFAULT.replace(count_abs=16, count_outliers=Allowance(0.01, relative=True),
                        where=("provider",), require_once=("7",), budget=10**9)
    again = Contract.from_json(c.to_json())
    assert again == c.replace(require_once_ids=())  # token names stay unresolved in reports
    assert again.to_json() == c.to_json()


def test_token_ids_resolve_without_a_tokenizer_and_names_need_one():
    c = DEFAULT.replace(require_once=("151668",), forbid=("7", "8"))
    assert (c.require_once_ids, c.forbid_ids) == ((151668,), (7, 8))
    with pytest.raises(ContractError, match="need a tokenizer"):
        DEFAULT.replace(require_once=("</think>",))
