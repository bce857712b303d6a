"""One truth in every output: one pytest run, and its outputs compared with each other on
the same records: the terminal (failure sections, summary table, worst records), the HTML
page's embedded data and its drawing in a real browser, the JSON report, the failures
file, the Markdown summary and the GitHub annotations.

- the signed difference is billed - counted everywhere (model/rules.py);
- a record's place is `path:LINE` or `path:row N` everywhere (base/formats.py);
- ids are named by their file's own contract (a folder's pytest_tokaudit_contract), and
  the page shows that folder's contract;
- records = audited + skipped + unreadable, in every table;
- the page's charts say what they draw (every bar within the labelled range, the mean bars
  coloured by the mean check's own verdict, no clipped text, the grid as wide as the page).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import TokProject, assert_no_crash, failure_section, summary_section

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

BLOB = re.compile(r'<script type="application/json" id="tokaudit-data">(.*?)</script>', re.S)

CUSTOM = """
def pytest_tokaudit_contract(path, contract):
    return contract.replace(id_field="custom_id", count_mean_rel="50%")
"""


def rec(rid: Any, n: int, billed: int | None = None, key: str = "sample_id") -> dict[str, Any]:
    return {key: rid, "completion_tokens": n if billed is None else billed,
            "output_ids": list(range(1000, 1000 + n))}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run over: a JSONL file of 50 lines, 2 of them unreadable and one record billed
    100 for 214 tokens; a Parquet file whose row 30 is billed 130 for 20; a folder whose
    contract names its ids custom_id (one of them twice) and allows a larger mean."""
    pytester_dir = tmp_path_factory.mktemp("one-truth")
    project = TokProject.__new__(TokProject)
    project.path, project.mode = pytester_dir, ("-p", "no:xdist")
    project.ini(tokaudit_unique_ids="true", tokaudit_count_mean_abs="0")
    lines: list[Any] = [rec(i, 20) for i in range(1, 51)]
    lines[9] = rec(10, 214, 100)
    lines[19] = "{not json"
    lines[29] = "[1, 2]"
    project.jsonl("data/a.jsonl", lines)
    rows = [rec(100 + i, 20) for i in range(40)]
    rows[29] = rec(129, 20, 130)
    (pytester_dir / "data").mkdir(exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), pytester_dir / "data/p.parquet")
    project.write("data/sub/conftest.py", CUSTOM)
    project.jsonl("data/sub/c.jsonl", [rec("x", 10, key="custom_id"), rec("y", 10, 13, key="custom_id"),
                                       rec("x", 10, key="custom_id")])
    out = pytester_dir / "out"
    out.mkdir()
    import subprocess
    import sys

    from conftest import UNRELATED_PLUGINS

    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--tokaudit", "data", "-p", "no:xdist", *UNRELATED_PLUGINS,
         "--tokaudit-html=out/page.html", "--tokaudit-json=out/audit.json",
         "--tokaudit-failures=out/failures.jsonl", "--tokaudit-markdown=out/summary.md",
         "--tokaudit-annotations=github"],
        cwd=pytester_dir, capture_output=True, text=True, timeout=120,
        env={**__import__("os").environ, "PYTEST_ADDOPTS": "-p no:randomly"})
    result = pytest.RunResult(proc.returncode, proc.stdout.splitlines(), proc.stderr.splitlines(), 0)
    assert_no_crash(result)
    assert result.ret == 1, proc.stdout
    page = (out / "page.html").read_text("utf-8")
    return {
        "result": result,
        "stdout": proc.stdout,
        "path": pytester_dir,
        "page": page,
        "html": json.loads(BLOB.findall(page)[0]),
        "json": json.loads((out / "audit.json").read_text()),
        "failures": [json.loads(line) for line in (out / "failures.jsonl").read_text().splitlines()],
        "markdown": (out / "summary.md").read_text(),
        "annotations": [line for line in proc.stdout.splitlines() if line.startswith("::")],
    }


def _json_file(run: dict[str, Any], path: str) -> dict[str, Any]:
    return next(f for f in run["json"]["files"] if f["path"] == path)


def test_the_signed_difference_is_billed_minus_counted_in_every_output(run):
    """The record billed 100 for 214 tokens is -114 everywhere; Parquet row 30, billed 130
    for 20, is +110."""
    for path, where, billed, counted, diff in (("data/a.jsonl", "data/a.jsonl:10", 100, 214, -114),
                                               ("data/p.parquet", "data/p.parquet:row 30", 130, 20, 110)):
        text = f"billed {billed}, counted {counted} ({diff:+d}, {diff / billed:+.1%})"
        # the failure text
        assert any(line.startswith(f"{where}: ") and text in line
                   for line in failure_section(run["result"], path)), text
        # the worst records table
        row = next(line for line in summary_section(run["result"]) if line.startswith(where + " "))
        assert row.split()[-3:] == [f"{billed:,}", f"{counted:,}", f"{diff:+,}"], row
        # the HTML page's data (table and tooltips) and the JSON report
        html_row = next(r for r in run["html"]["worst"] if r[0] == path)
        assert html_row[3:7] == [billed, counted, diff, where]
        assert f"{where}: " in run["page"] and f"(billed - counted {diff:+,})" in run["page"]
        worst = _json_file(run, path)["worst_records"][0]
        assert (worst["billed"], worst["counted"], worst["diff"], worst["location"]) == (
            billed, counted, diff, where)
        # the failures file, the Markdown summary, the annotations
        entry = next(e for e in run["failures"] if e["check"] == "count" and e["path"] == path)
        assert (entry["diff"], entry["location"]) == (diff, where) and text in entry["message"]
        assert text in run["markdown"]
        assert any(text.replace("%", "%25") in a for a in run["annotations"])
    assert re.search(r"^record +id +billed +counted +billed - counted$",
                     "\n".join(summary_section(run["result"])), re.M)


def test_a_place_is_worded_one_way_in_every_output(run):
    """`path:LINE` for lines, `path:row N` for rows: terminal, HTML, JSON, failures file; the
    Markdown list and a row's annotation say `line N` / `row N` within their file."""
    terminal = run["stdout"]
    assert "data/p.parquet:row 30: sample_id=129: count:" in terminal
    assert "data/p.parquet:30" not in terminal + run["page"]
    assert ["data/p.parquet:row 30"] == [r[6] for r in run["html"]["findings"]
                                         if r[0] == "data/p.parquet" and r[1] is not None]
    assert {e["location"] for e in run["failures"]} == {
        "data/a.jsonl:10", "data/a.jsonl:20", "data/a.jsonl:30", "data/p.parquet:row 30"}
    assert "- row 30: sample_id=129: **count**:" in run["markdown"]
    assert "- line 10: sample_id=10: **count**:" in run["markdown"]
    assert any(a.startswith("::error file=data/p.parquet,title=tokaudit count::row 30: sample_id=129: ")
               for a in run["annotations"]), run["annotations"]
    assert any(a.startswith("::error file=data/a.jsonl,line=10,title=tokaudit count::sample_id=10: ")
               for a in run["annotations"])


def test_ids_are_named_and_files_shown_by_their_folders_own_contract(run):
    from conftest import failure_sections

    section = failure_sections(run["result"], "tokaudit::unique_ids")[0]
    assert section[1] == "custom_id='x': 2 records: data/sub/c.jsonl:1, data/sub/c.jsonl:3", section
    assert "sample_id='x'" not in run["stdout"] + run["page"] + run["markdown"]
    assert "::error file=pytest.ini,line=1,title=tokaudit unique_ids::" in run["stdout"]
    assert "custom_id='x': 2 records" in next(a for a in run["annotations"] if "unique_ids" in a)
    # the page: the folder's contract, and its ids labelled by it
    assert ["data/sub/", "tokaudit_id_field", "custom_id"] in run["html"]["folders"]
    assert ["data/sub/", "tokaudit_count_mean_rel", "50%"] in run["html"]["folders"]
    assert "Folders with a contract of their own" in run["page"]
    c_row = next(r for r in run["html"]["worst"] if r[0] == "data/sub/c.jsonl")
    assert c_row[7] == "custom_id='y'" and "data/sub/c.jsonl:2: custom_id='y': billed 13" in html.unescape(run["page"])
    assert _json_file(run, "data/sub/c.jsonl")["contract"] == {
        "tokaudit_id_field": "custom_id", "tokaudit_count_mean_rel": "50%"}
    assert _json_file(run, "data/a.jsonl")["contract"] == {}


def test_the_counts_add_up_in_every_table(run):
    """2 unreadable lines of 50: records 50, audited 48, unreadable 2."""
    header, *rows = summary_section(run["result"])[:5]
    cells = dict(zip(header.split(), next(r for r in rows if r.startswith("data/a.jsonl ")).split()))
    assert (cells["records"], cells["audited"], cells["skipped"], cells["unreadable"]) == (
        "50", "48", "0", "2")
    section = failure_section(run["result"], "data/a.jsonl")
    assert section[0].startswith("1 of 48 audited records break the contract; 2 unreadable lines;")
    entry = _json_file(run, "data/a.jsonl")
    assert (entry["records"], entry["audited"], entry["skipped"], entry["unreadable"]) == (50, 48, 0, 2)
    totals = run["json"]["totals"]
    assert totals["records"] == totals["audited"] + totals["unreadable"] == 93
    files = {r[0]: dict(zip(run["html"]["columns"], r)) for r in run["html"]["files"]}
    assert (files["data/a.jsonl"]["records"], files["data/a.jsonl"]["audited"],
            files["data/a.jsonl"]["unreadable"]) == (50, 48, 2)
    assert run["html"]["totals"]["unreadable"] == 2
    assert "| `data/a.jsonl` | 50 | 48 | 2 |" in run["markdown"]
    for f in run["json"]["files"]:
        assert f["records"] == f["audited"] + f["skipped"] + f["unreadable"], f["path"]


def test_the_mean_bars_are_coloured_by_the_mean_check_against_each_files_tolerance(run):
    """data/sub/c.jsonl's mean |diff| (1 of 10 per record) is within its folder's 50% but
    not within the ini's 0.5%: a passing bar; a.jsonl fails its mean check: a red one."""
    bars = re.search(r'<figure id="plot-mean">(.*?)</figure>', run["page"], re.S).group(1)
    tips = re.findall(r'<rect class="mark"[^>]*fill="([^"]+)"><title>([^<]*)</title>', bars)
    by_path = {tip.split(":")[0]: (fill, tip) for fill, tip in tips}
    assert by_path["data/sub/c.jsonl"][0] == "#0072B2", by_path
    assert "its mean tolerance 50.000%: mean check passes" in by_path["data/sub/c.jsonl"][1]
    assert by_path["data/a.jsonl"][0] == "#D55E00" and "mean check FAILS" in by_path["data/a.jsonl"][1]
    # each bar carries its own tolerance mark
    assert bars.count('class="limit"') == len(tips)


TICK = re.compile(r'<text [^>]*text-anchor="middle" font-size="9"[^>]*>([^<]*)</text>')
DIFF_LABEL = re.compile(r"^([+-]?\d+)(?:\.\.([+-]\d+))?$")


def _span(label: str) -> tuple[int, int]:
    m = DIFF_LABEL.match(label)
    assert m, label
    return int(m.group(1)), int(m.group(2) or m.group(1))


def test_every_histogram_bar_lies_within_its_labelled_range(run):
    """The outliers' bins (-127..-96, +96..+127) are labelled: the ticks run from the first
    bar to the last, in every billed - counted histogram of the page."""
    charts = re.findall(r'<figure id="plot-diff">.*?</figure>', run["page"], re.S)
    charts += re.findall(r'<section id="focus">.*?</section>', run["page"], re.S)
    assert len(charts) == 2
    for section in charts:
        for chart in re.findall(r'<svg class="plot".*?</svg>', section, re.S):
            ticks = [_span(t) for t in re.findall(TICK, chart)]
            bars = [_span(t) for t in re.findall(
                r'<rect class="mark"[^>]*><title>([^<:]*): [\d,]+ \(', chart)]
            assert bars and ticks
            assert min(t[0] for t in ticks) <= min(b[0] for b in bars), (ticks, bars)
            assert max(t[1] for t in ticks) >= max(b[1] for b in bars), (ticks, bars)
    labels = re.findall(TICK, charts[0])
    assert labels[0] == "-127..-96" and labels[-1] == "+96..+127", labels


def test_the_page_draws_what_the_other_outputs_say(browser, run, tmp_path: Path):
    """In a real browser: the worst and findings tables show the data's places, ids and
    signs; no text of a chart is clipped; the plot grid is as wide as the page."""
    page_path = run["path"] / "out/page.html"
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    try:
        url = page_path.resolve().as_uri()
        page.route("**/*", lambda r: r.continue_() if r.request.url == url else r.abort())
        page.goto(url)
        page.wait_for_selector("body[data-ready='1']", state="attached")
        worst = page.locator("#worst-table").inner_text()
        assert "data/p.parquet:row 30" in worst and "+110" in worst
        assert "data/a.jsonl:10" in worst and "-114" in worst and "custom_id='y'" in worst
        assert "data/p.parquet:row 30" in page.locator("#findings-table").inner_text()
        clipped = page.evaluate("""() => {
            const out = [];
            for (const s of document.querySelectorAll('#plots svg.plot, #focus svg.plot')) {
              const r = s.getBoundingClientRect();
              for (const t of s.querySelectorAll('text')) {
                const b = t.getBoundingClientRect();  // as drawn: rotated labels too
                if (b.left < r.left - 0.5 || b.right > r.right + 0.5 || b.top < r.top - 0.5
                    || b.bottom > r.bottom + 0.5)
                  out.push(t.textContent);
              }
            }
            return out; }""")
        assert clipped == []
        gap = page.evaluate("""() => {
            const g = document.querySelector('#plots .grid').getBoundingClientRect();
            const right = Math.max(...Array.from(document.querySelectorAll('#plots .grid > figure'))
                                   .map(f => f.getBoundingClientRect().right));
            return g.right - right; }""")
        assert gap < 2, gap
        shot = tmp_path / "one-truth.png"
        page.screenshot(path=str(shot), full_page=True)
        print(f"screenshot: {shot}")
    finally:
        context.close()


# -- an engine's start is not audit time; Ray keeps its own lines to itself ---------------------
SLOW_ENGINE = """
import pytest

NOW = [0.0]


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):  # the run's meter reads this clock from now on
    meter = session.config.pluginmanager.get_plugin("tokaudit.progress").meter
    meter.began, meter.due = 0.0, 0.0

    def clock():
        NOW[0] += 0.5
        return NOW[0]

    meter.clock = clock


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):  # an engine whose start takes 1,000 s, as Ray's starts
    NOW[0] += 1000.0
"""


def test_the_progress_clock_starts_after_the_engines_start(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini(tokaudit_progress_interval="0.001")
    project.write("conftest.py", SLOW_ENGINE)
    project.jsonl("data/a.jsonl", [rec(i, 5) for i in range(20)])
    result = project.run()
    assert result.ret == 0
    lines = [line for line in result.stdout.lines if line.startswith("tokaudit: 20 records")]
    assert lines, result.stdout.str()
    took = re.search(r" in ([\d.]+) s ", lines[-1])
    assert took and float(took.group(1)) < 10, lines  # not the 1,000 s of the engine's start


# A local Ray instance takes seconds to start: the suite starts one in run/test_ray.py
# (test_without_ray_address_a_local_instance_is_started_and_shut_down), this one in full.
@pytest.mark.full
def test_ray_keeps_its_own_warnings_out_of_pytests_output(pytester: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch):
    """A local Ray instance (no RAY_ADDRESS) says "Token authentication is enabled ..." and
    logs its start: none of it in the run's output unless TOKAUDIT_RAY_LOGS=1 asks."""
    pytest.importorskip("ray")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("TOKAUDIT_RAY_LOGS", raising=False)
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini(tokaudit_engine="ray")
    project.jsonl("data/a.jsonl", [rec(i, 5) for i in range(20)])
    result = project.run()
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    text = result.stdout.str() + result.stderr.str()
    assert "Token authentication" not in text and "WARNING" not in text, text
    assert result.stderr.str().strip() == ""
