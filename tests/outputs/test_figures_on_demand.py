"""The HTML report's figures (model/figures.py) are computed only when an output draws them
(--tokaudit-html, pytest-html's --html, --tokaudit-json, whose reports `merge` draws from):
a plain run does no figure work, and its cache entries never stand in for an audit that
must draw (run/cache.reuse)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import forkrun
from conftest import UNRELATED_PLUGINS, TokProject, assert_no_crash, rec
from pytest_tokaudit import api
from pytest_tokaudit.model.figures import Figures
from tokdata import qwen_dir

BLOB = re.compile(r'<script type="application/json" id="tokaudit-data">(.*?)</script>', re.S)


def blob(page: str) -> Any:
    """The page's data: what its plots are drawn from."""
    (found,) = BLOB.findall(page)
    return json.loads(found)


def records() -> list[dict[str, Any]]:
    return [rec(i, 40 + i % 7, 40 + i % 7 + (i % 5 == 0), provider="ab"[i % 2],
                finish_reason="length" if i % 9 == 0 else "stop") for i in range(1, 60)]


KEYS = {"tokaudit_group_by": "provider", "tokaudit_finish_reason_field": "finish_reason",
        "tokaudit_finish_reason": "stop length", "tokaudit_count_mean_rel": ""}


@pytest.mark.parametrize("columnar", ["1", "0"], ids=["kernel", "per-line"])
def test_the_api_draws_figures_only_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             columnar: str):
    monkeypatch.setenv("TOKAUDIT_COLUMNAR", columnar)  # the kernel (numpy), or line by line
    rt = {} if columnar == "1" else {"tokaudit_tokenizer": str(qwen_dir()),
                                     "tokaudit_roundtrip_rel": 1.0}
    contract = api.Contract.from_dict({**KEYS, **rt})
    path = tmp_path / "a.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records()))
    drawn = api.audit_file(contract, path, figures=True)
    bare = api.audit_file(contract, path)  # by default: nothing but the HTML report reads them
    fig = drawn.summary.figures
    assert fig.records == 59 and fig.finish == {"stop": 53, "length": 6}
    assert sum(fig.rt) == (0 if columnar == "1" else 59)
    assert len(drawn.summary.group_figures.groups) == 2
    assert bare.summary.figures == Figures() and not bare.summary.group_figures
    # everything else as with them: the verdict, the counts, the findings
    assert (bare.failed, bare.totals, bare.findings) == (drawn.failed, drawn.totals, drawn.findings)
    assert bare.summary.worst == drawn.summary.worst and bare.summary.worst
    # a stream of dicts too (in batches of 32: the kernel's, with a contract it takes)
    plain = api.Contract.from_dict({"tokaudit_count_abs": 0, **rt})
    kept = api.audit_records(plain, records(), batch=32, figures=True)
    found = list(kept)
    stream = api.audit_records(plain, records(), batch=32)
    assert list(stream) == found and found
    assert stream.file_summary.figures == Figures() and not stream.file_summary.group_figures
    assert kept.file_summary.figures.records == 59


@pytest.mark.parametrize("mode", [("-p", "no:xdist"), ("-n", "2")], ids=["no-xdist", "n2"])
def test_a_plain_runs_cache_gives_the_reports_their_figures(pytester: pytest.Pytester,
                                                            mode: tuple[str, ...]):
    """The cache case: a plain run fills the cache without figures; the HTML page and the
    JSON report that follow have the figures of a cold run; their entries serve plain runs."""
    project = TokProject(pytester, mode)
    project.ini(**KEYS)
    project.jsonl("data/a.jsonl", records())
    project.jsonl("data/b.jsonl", [rec(i, 30, 30 + i % 3) for i in range(100, 140)])
    plain = project.run()
    assert_no_crash(plain)
    assert plain.ret == 0
    drawn = project.run("--tokaudit-html=page.html", "--tokaudit-json=audit.json")
    assert drawn.ret == 0
    report = json.loads((project.path / "audit.json").read_text())
    data = blob((project.path / "page.html").read_text("utf-8"))
    hist = data["histograms"]["all"]
    assert sum(n for _, n in hist["diff"]) == 99 == sum(f["checked"] for f in report["files"])
    assert {tuple(k) for k, _ in data["histograms"]["groups"]} == {("a",), ("b",), ("(none)",)}
    cold = project.run("--tokaudit-json=cold.json", "--tokaudit-no-cache")
    assert cold.ret == 0
    fresh = json.loads((project.path / "cold.json").read_text())
    for name in ("figures", "group_figures"):
        assert [f[name] for f in report["files"]] == [f[name] for f in fresh["files"]]
    again = project.run()  # the drawing run's entries serve a run that does not draw
    again.stdout.fnmatch_lines(["tokaudit cache: 2 of 2 audit items reused*"])


def test_pytest_html_after_a_plain_cached_run_still_draws_each_item(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-n", "2"))
    project.ini()
    project.jsonl("data/a.jsonl", [rec(i, 100 + i, 100 + i + i % 3) for i in range(1, 80)])
    project.jsonl("data/b.jsonl", [rec(i, 50, 52) for i in range(100, 110)])
    pairs = zip(UNRELATED_PLUGINS[::2], UNRELATED_PLUGINS[1::2])
    args = ["--tokaudit", "data", "-n", "2",
            *(a for pair in pairs if pair[1] not in ("no:html", "no:metadata") for a in pair)]
    # pytest-html loaded but not asked for: the same modules, so the same cache keys
    assert forkrun.runpytest(pytester, *args).ret == 0
    result = forkrun.runpytest(pytester, *args, "--html=report/report.html",
                                           "--self-contained-html")
    assert_no_crash(result)
    assert result.ret == 0
    text = (project.path / "report/report.html").read_text("utf-8")
    assert text.count("tokaudit-plots") >= 3  # each item's plots, and the summary's


def test_a_ray_task_takes_the_switch_with_its_summary(tmp_path: Path):
    """The Ray engine's task gets the item's empty summary (pickled, as Ray sends it) and
    sends it back as JSON: whether to draw travels both ways."""
    import pickle

    from pytest_tokaudit.api import new_summary
    from pytest_tokaudit.model.summary import FileSummary
    from pytest_tokaudit.run.engines import ray as engine
    from pytest_tokaudit.sources.base import WHOLE

    path = tmp_path / "a.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records()))
    contract = api.Contract.from_dict(KEYS)
    engine._HOOKS["test-figures"] = api.check_hook()  # as worker_hook builds it from the blob
    try:
        back = {}
        for figures in (True, False):
            sent = pickle.loads(pickle.dumps(new_summary(contract, "a.jsonl", figures=figures)))
            out = engine.audit_task("test-figures", b"", path, contract, WHOLE, sent)
            back[figures] = FileSummary.from_json(out["summary"])
    finally:
        del engine._HOOKS["test-figures"]
    assert back[True].figures.records == 59 and back[True].group_figures
    assert not back[False].plotted and back[False].figures == Figures()
    assert not back[False].group_figures and back[False].checked == 59
