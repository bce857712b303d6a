"""Money by component: input, cached input and output tokens priced per million, per
provider/model from a price table; shown in the terminal summary, the JSON report, the
Markdown summary and the HTML page; tokaudit_budget_money a dataset check on the total;
tokaudit_price_per_mtok as before. JSONL in process and under -n 2; Parquet alike."""

from __future__ import annotations

import json
import re

import pytest

from conftest import TokProject, assert_no_crash
from wholebill import audited_both_ways, write_jsonl


def rows() -> list[dict]:
    out = []
    for k in range(4):
        out.append({"sample_id": k, "provider": "Alpha" if k < 2 else "Beta", "model": "m1",
                    "output_ids": list(range(100)), "completion_tokens": 100,
                    "usage": {"prompt_tokens": 1000, "prompt_tokens_details": {"cached_tokens": 400}}})
    return out


PRICES = "provider,model,input,cached_input,output\nBeta,m1,2.00,0.50,8.00\n"


def money_project(project: TokProject, **keys: str) -> None:
    write_jsonl(project.path / "data/a.jsonl", rows())
    (project.path / "prices.csv").write_text(PRICES)
    project.ini(testpaths="data", tokaudit_group_by="provider",
                tokaudit_price_input_per_mtok="1.00", tokaudit_price_cached_input_per_mtok="0.25",
                tokaudit_price_output_per_mtok="4.00", tokaudit_prices="prices.csv", **keys)


# Alpha (the ini's prices): 2 x (600 x 1 + 400 x 0.25 + 100 x 4) / 1e6 = $0.0022
# Beta (the table's): 2 x (600 x 2 + 400 x 0.5 + 100 x 8) / 1e6 = $0.0044
TOTAL = 0.0066


def test_spend_by_component_and_group_in_every_output(project: TokProject):
    money_project(project, tokaudit_budget_money="0.005")
    result = project.run("--tokaudit-json=report.json", "--tokaudit-markdown=summary.md",
                         "--tokaudit-html=report.html")
    assert_no_crash(result)
    out = result.stdout.str()
    assert ("spend $0.0066: input 2,400 tokens $0.0036, cached input 1,600 tokens $0.0006, "
            "output 400 tokens $0.0024") in out
    assert "  provider=Alpha: $0.0022 (2 records; input 1,200, cached 800, output 200 tokens)" in out
    assert "  provider=Beta: $0.0044 (2 records; input 1,200, cached 800, output 200 tokens)" in out
    assert re.search(r"pytest\.ini::tokaudit::budget_money: failed: over budget: spent \$0\.0066 of "
                     r"\$0\.0050", out), out
    spend = json.loads((project.path / "report.json").read_text())["spend"]
    assert spend["total"] == pytest.approx(TOTAL)
    assert spend["components"]["cached_input"] == {"tokens": 1600, "cost": pytest.approx(0.0006)}
    assert [g["group"] for g in spend["by_group"]] == [{"provider": "Alpha"}, {"provider": "Beta"}]
    assert "- provider=Beta: $0.0044" in (project.path / "summary.md").read_text()
    assert "<h2>Spend by component</h2>" in (project.path / "report.html").read_text()
    result.assert_outcomes(passed=2, failed=1)
    # Two xdist workers: the same spend, summed on the controller.
    again = TokProject(project.pytester, ("-n", "2")).run("--tokaudit-json=report2.json")
    assert_no_crash(again)
    assert json.loads((project.path / "report2.json").read_text())["spend"] == spend


def test_spend_is_the_same_on_the_columnar_path(pytester: pytest.Pytester, monkeypatch):
    """The money check reads whole records: the kernel's full mode hands it the same."""
    project = TokProject(pytester, ())
    money_project(project, tokaudit_budget_money="0.005")
    assert audited_both_ways(project, monkeypatch)["spend"]["total"] == pytest.approx(TOTAL)


def test_budget_money_within_and_the_old_price_key(pytester: pytest.Pytester):
    project = TokProject(pytester, ())
    money_project(project, tokaudit_budget_money="1", tokaudit_price_per_mtok="2.50",
                  tokaudit_budget="100000")
    result = project.run()
    assert_no_crash(result)
    out = result.stdout.str()
    assert "pytest.ini::tokaudit::budget_money: passed: spent $0.0066 of $1.00 (0.7%)" in out
    assert "pytest.ini::tokaudit::budget: passed: billed 400 of 100,000 tokens (0.4%); $0.0010 of $0.25" in out


def test_parquet_spend_equals_jsonl(pytester: pytest.Pytester):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    project = TokProject(pytester, ())
    money_project(project)
    (project.path / "data/a.jsonl").unlink()
    pq.write_table(pa.Table.from_pylist(rows()), project.path / "data/a.parquet")
    result = project.run("--tokaudit-json=report.json")
    assert_no_crash(result)
    assert json.loads((project.path / "report.json").read_text())["spend"]["total"] == pytest.approx(TOTAL)


def test_a_record_without_a_prompt_count_is_said_not_priced_as_zero(pytester: pytest.Pytester):
    project = TokProject(pytester, ())
    money_project(project)
    data = rows()
    del data[1]["usage"]
    write_jsonl(project.path / "data/a.jsonl", data)
    result = project.run("--tokaudit-json=report.json")
    assert_no_crash(result)
    assert ("  1 record without a billed prompt count (tokaudit_prompt_count_field): their input "
            "is not in the spend") in result.stdout.lines
    spend = json.loads((project.path / "report.json").read_text())["spend"]
    assert spend["records_without_prompt_count"] == 1
    assert spend["components"]["input"]["tokens"] == 1800


def test_a_toml_price_table_prices_as_the_csv_one(pytester: pytest.Pytester):
    """tokaudit_prices may name a TOML file of [[price]] tables (docs/whole-bill.md): the
    same spend as the CSV table; one without [[price]] tables, or not TOML, is refused
    naming the key and the file."""
    project = TokProject(pytester, ())
    money_project(project)
    (project.path / "prices.toml").write_text(
        '[[price]]\nprovider = "Beta"\nmodel = "m1"\ninput = 2.0\ncached_input = "0.50"\noutput = 8\n')
    result = project.run("--tokaudit-json=report.json", "-o", "tokaudit_prices=prices.toml")
    assert_no_crash(result)
    spend = json.loads((project.path / "report.json").read_text())["spend"]
    assert spend["total"] == pytest.approx(TOTAL)
    assert [round(g["cost"], 6) for g in spend["by_group"]] == [0.0022, 0.0044]
    for name, text, why in (("prices.toml", "[price]\nprovider = 'Beta'\n", "has no [[price]] tables"),
                            ("prices.toml", "[[price]\n", "prices.toml: "),
                            ("bad.csv", "provider,input\nBeta,two\n", "row 1, input: 'two' is not a price")):
        (project.path / name).write_text(text)
        result = project.run("-o", f"tokaudit_prices={name}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
        assert result.stderr.lines[0].startswith("ERROR: tokaudit_prices (-o): ") and why in result.stderr.lines[0], \
            result.stderr.str()
    # The API refuses it alike, naming the key.
    from pytest_tokaudit import api
    with pytest.raises(api.ContractError, match=r"tokaudit_prices \(.*\): .*is not a price"):
        api.Contract.from_dict({"tokaudit_prices": str(project.path / "bad.csv")})
