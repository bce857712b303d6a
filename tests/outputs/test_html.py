"""--tokaudit-html (outputs/html.py): the page's numbers are the summaries', it opens offline
in a real browser with every plot drawn, hostile data never runs or breaks it, it stays
small for 10,000 files; pytest-html's report gets each item's plots.

The browser is Debian's chromium driven by Playwright (no browser download); one per module.
Each browser test saves a screenshot under its tmp_path and prints the path.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

import forkrun
from conftest import RUN_TIMEOUT, UNRELATED_PLUGINS, TokProject, assert_no_crash, rec
from pytest_tokaudit.__main__ import main as merge_main
from pytest_tokaudit.model.contract import Contract
from pytest_tokaudit.model.figures import diff_range
from pytest_tokaudit.model.outcome import Outcome
from pytest_tokaudit.model.summary import FileSummary
from pytest_tokaudit.outputs.html import build

BLOB = re.compile(r'<script type="application/json" id="tokaudit-data">(.*?)</script>', re.S)
HOSTILE_ID = '</script><script>window.pwned=1</script>"\'&ñ日本'
HOSTILE_DIR = '<img src=x onerror="window.pwned=2">ü'


def blob(page: str) -> dict[str, Any]:
    found = BLOB.findall(page)
    assert len(found) == 1
    return json.loads(found[0])


def grouped_project(project: TokProject, **keys: str) -> None:
    """Two providers, one billing 5% more than we count; a cut response; a bad line."""
    project.ini(tokaudit_group_by="provider", tokaudit_finish_reason="stop",
                tokaudit_finish_reason_field="finish_reason", tokaudit_count_mean_rel="",
                tokaudit_budget="100000", tokaudit_price_per_mtok="2", **keys)
    a = [rec(i, 100 + i % 50, provider="acme", finish_reason="stop") for i in range(1, 300)]
    b = [rec(1000 + i, 100 + i % 50, int((100 + i % 50) * 1.05), provider="bolt",
             finish_reason="length" if i % 40 == 0 else "stop") for i in range(1, 200)]
    project.jsonl("data/a.jsonl", a + [rec(9999, 20, 400, provider="acme", finish_reason="stop")])
    project.jsonl("data/sub/b.jsonl", b + ["{not json"])


def test_the_page_holds_the_numbers_of_the_summaries(project: TokProject):
    grouped_project(project)
    (project.path / "out").mkdir()
    result = project.run("--tokaudit-html=out/page.html", "--tokaudit-json=audit.json",
                         paths=("data",))
    assert_no_crash(result)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["tokaudit HTML report: out/page.html"])
    page = (project.path / "out/page.html").read_text("utf-8")
    data = blob(page)
    report = json.loads((project.path / "audit.json").read_text())
    assert data["verdict"] == "failed" and data["exitstatus"] == 1
    assert '<header class="failed"' in page
    checked = sum(f["checked"] for f in report["files"])
    hist = data["histograms"]["all"]
    # every checked record is in exactly one bin of each histogram
    assert sum(n for _, n in hist["diff"]) == sum(n for _, n in hist["length"]) == checked
    assert data["totals"]["checked"] == checked == 299 + 1 + 199
    # the record billed 400 for 20 ids is the worst, with its file and line
    assert data["worst"][0] == ["data/a.jsonl", 300, 9999, 400, 20, 380, "data/a.jsonl:300",
                                "sample_id=9999"]
    assert report["files"][0]["worst_records"][0]["line"] == 300
    # bins: the sum of (billed - counted) lies within the bins' bounds
    total_diff = sum(f["billed"] - f["counted"] for f in report["files"])
    lo = sum(diff_range(i)[0] * n for i, n in hist["diff"])
    hi = sum(diff_range(i)[1] * n for i, n in hist["diff"])
    assert lo <= total_diff <= hi
    groups = {tuple(k): v for k, v in data["histograms"]["groups"]}
    assert set(groups) == {("acme",), ("bolt",)}
    assert sum(n for _, n in groups[("bolt",)]["diff"]) == 199
    assert groups[("bolt",)]["finish"] == {"stop": 195, "length": 4}
    assert hist["finish"] == {"stop": 495, "length": 4}
    # bolt bills more than it counts: its records sit right of 0
    assert all(diff_range(i)[0] > 0 for i, _ in groups[("bolt",)]["diff"] if diff_range(i)[1] > 2)
    files = {row[0]: dict(zip(data["columns"], row)) for row in data["files"]}
    assert {p: f["failed"] for p, f in files.items()} == {"data/a.jsonl": True,
                                                          "data/sub/b.jsonl": True}
    for entry in report["files"]:
        assert files[entry["path"]]["findings"] == entry["findings"]
        assert files[entry["path"]]["billed"] == entry["billed"] + entry["billed_unusable"]
    assert any(r[3] == "json" and r[0] == "data/sub/b.jsonl" for r in data["findings"])
    assert {o["name"]: o["outcome"] for o in data["dataset"]}["budget"] == "passed"
    assert ["tokaudit_group_by", "provider", "pytest.ini", ""] in data["contract"]
    assert {"diff", "scatter", "length", "finish", "spend"} <= set(data["plots"])
    # the same numbers again from the JSON report, through merge --html
    merged = project.path / "merged.html"
    assert merge_main(["merge", str(project.path / "audit.json"), "--html", str(merged)]) == 1
    again = blob(merged.read_text("utf-8"))
    assert again["histograms"] == data["histograms"] and again["worst"] == data["worst"]
    assert again["files"] == data["files"]


def test_the_same_data_draws_the_same_page_in_process_and_under_xdist(pytester: pytest.Pytester):
    """Deterministic: the sample is a hash of the lines, summaries merge in any order."""
    project = TokProject(pytester, ())
    grouped_project(project, tokaudit_shard_size="8000")  # a.jsonl is audited as shards
    assert "tokaudit[shard 1]" in project.run("--co", "-q", "-p", "no:xdist").stdout.str()
    pages = []
    for mode in (("-p", "no:xdist"), ("-n", "2")):
        result = project.run(*mode, "--tokaudit-html=page.html", "--tokaudit-no-cache")
        assert result.ret == 1
        pages.append((project.path / "page.html").read_text("utf-8"))
    assert pages[0] == pages[1]


def test_an_unwritable_page_is_a_usage_error_before_the_audit(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini()
    project.jsonl("data/a.jsonl", [rec(1)])
    result = project.run("--tokaudit-html=missing/dir/page.html")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--tokaudit-html: cannot write *missing/dir/page.html*does not exist*"])


# -- the browser ----------------------------------------------------------------------------------
class Visit:
    """A page opened offline: every request but the file's own is blocked and recorded."""

    def __init__(self, browser: Any, path: Path, ready: str):
        self.url = path.resolve().as_uri()
        self.context = browser.new_context(viewport={"width": 1300, "height": 900})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url) if r.url != self.url else None)
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.route("**/*", lambda r: r.continue_() if r.request.url == self.url else r.abort())
        start = time.perf_counter()
        self.page.goto(self.url)
        self.page.wait_for_selector(ready, state="attached")
        self.seconds = time.perf_counter() - start

    def marks(self) -> list[int]:
        """How many marks each plot drew, and that each has a real size on screen."""
        return self.page.evaluate("""() => Array.from(document.querySelectorAll('svg.plot'))
            .map(s => { const b = s.getBBox(); return b.width > 0 && b.height > 0 ?
                        s.querySelectorAll('.mark').length : -1; })""")

    def shot(self, path: Path) -> None:
        self.page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")

    def close(self) -> None:
        self.context.close()


def test_the_page_opens_offline_with_every_plot_drawn(browser, pytester: pytest.Pytester,
                                                     tmp_path: Path):
    project = TokProject(pytester, ("-p", "no:xdist"))
    grouped_project(project)
    project.run("--tokaudit-json=base.json")
    # a later run on worse data, against that baseline
    project.jsonl("data/a.jsonl", [rec(i, 100, 104, provider="acme", finish_reason="stop")
                                   for i in range(1, 300)])
    result = project.run("--tokaudit-html=page.html", "--tokaudit-baseline=base.json")
    assert result.ret == 1
    page_path = project.path / "page.html"
    data = blob(page_path.read_text("utf-8"))
    worse = {r[0]: r[-1] for r in data["baseline"]["rows"]}
    assert "mean |diff| / mean billed" in worse["data/a.jsonl"]
    visit = Visit(browser, page_path, "body[data-ready='1']")
    try:
        assert visit.errors == [] and visit.requests == [] and visit.dialogs == []
        marks = visit.marks()
        assert marks and all(n > 0 for n in marks), marks
        assert visit.page.locator("#plot-baseline svg .mark").count() >= 2
        rows = visit.page.locator("#files-table tbody tr")
        assert rows.count() == 2
        visit.page.fill("#files-table input[type=search]", "sub/")
        assert rows.count() == 1 and "data/sub/b.jsonl" in rows.first.inner_text()
        assert visit.page.locator("#baseline-table tbody tr.bad").count() == 1
        visit.shot(tmp_path / "tokaudit-page.png")
    finally:
        visit.close()


def test_hostile_ids_paths_and_text_never_run(browser, pytester: pytest.Pytester, tmp_path: Path):
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini(tokaudit_group_by="provider")
    project.jsonl(f"data/{HOSTILE_DIR}/x.jsonl", [
        rec(HOSTILE_ID, 10, 40, provider=HOSTILE_ID),
        rec("ok", 10, provider="<b>bold</b>"),
        {"sample_id": HOSTILE_ID, "completion_tokens": "<script>window.pwned=3</script>"},
    ])
    result = project.run("--tokaudit-html=page.html")
    assert_no_crash(result)
    page = (project.path / "page.html").read_text("utf-8")
    assert page.count("<script") == 2  # the data blob and the page's own script
    for markup in ("<script>window.pwned", "<img src=x", 'onerror="window', "<b>bold"):
        assert markup not in page
    data = blob(page)
    assert data["worst"][0][2] == HOSTILE_ID  # the strings themselves, unchanged
    assert data["files"][0][0] == f"data/{HOSTILE_DIR}/x.jsonl"
    visit = Visit(browser, project.path / "page.html", "body[data-ready='1']")
    try:
        assert visit.errors == [] and visit.requests == [] and visit.dialogs == []
        assert visit.page.evaluate("window.pwned") is None
        # the id as every output names it: its field and repr
        assert f"sample_id={HOSTILE_ID!r}" in visit.page.locator("#worst-table").inner_text()
        assert HOSTILE_DIR in visit.page.locator("#files-table").inner_text()
        assert all(n > 0 for n in visit.marks())
        visit.shot(tmp_path / "tokaudit-hostile.png")
    finally:
        visit.close()


@pytest.mark.full  # scale is the point; the suite draws the small pages above
def test_ten_thousand_files_stay_small_and_draw_one_table_page(browser, tmp_path: Path):
    files = []
    for k in range(10_000):
        s = FileSummary(path=f"data/part-{k // 500:03d}/batch-{k:05d}.jsonl", complete=True)
        for line in range(1, 41):
            billed = 200 + (k * 7 + line * 13) % 300
            s.add_counts(line, f"s-{k}-{line}", billed, billed + (line * k) % 5 - 2)
            s.records += 1
            s.audited += 1
        files.append(s)
    contract = Contract.from_json({"tokaudit_budget": "9000000"}, "pytest.ini")
    start = time.perf_counter()
    page = build(files, [Outcome("coverage", "passed", "10,000 files")], contract, 0, None)
    took = time.perf_counter() - start
    path = tmp_path / "big.html"
    path.write_text(page, "utf-8")
    size = path.stat().st_size
    print(f"10,000 files: {size:,} bytes, built in {took:.2f} s")
    assert size < 5_000_000
    data = blob(page)
    assert sum(n for _, n in data["histograms"]["all"]["diff"]) == 400_000
    assert len(data["files"]) == 10_000 and len(data["focus"]) <= 12
    visit = Visit(browser, path, "body[data-ready='1']")
    try:
        print(f"opened in {visit.seconds:.2f} s")  # how fast: the kit's `html` case
        assert visit.errors == [] and visit.requests == []
        assert visit.page.locator("#files-table tbody tr").count() == 50  # paged
        assert all(n > 0 for n in visit.marks())
        visit.shot(tmp_path / "tokaudit-10k.png")
    finally:
        visit.close()


def test_pytest_html_reports_get_each_items_plots(browser, pytester: pytest.Pytester,
                                                  tmp_path: Path):
    TokProject(pytester, ()).ini(tokaudit_budget="100000")
    project = TokProject(pytester, ())
    project.jsonl("data/a.jsonl", [rec(i, 100 + i, 100 + i + i % 3) for i in range(1, 80)])
    project.jsonl("data/b.jsonl", [rec(i, 50, 80) for i in range(100, 110)])
    pairs = zip(UNRELATED_PLUGINS[::2], UNRELATED_PLUGINS[1::2])
    args = [a for pair in pairs if pair[1] not in ("no:html", "no:metadata") for a in pair]
    result = forkrun.runpytest(pytester, 
        "--tokaudit", "data", "-n", "2", *args, "--html=report/report.html",
        "--self-contained-html", "-o", "render_collapsed=none", timeout=RUN_TIMEOUT)
    assert_no_crash(result)
    assert result.ret == 1
    report = project.path / "report/report.html"
    text = report.read_text("utf-8")
    assert text.count("tokaudit-plots") >= 3  # two items and the summary
    visit = Visit(browser, report, "#results-table")
    try:
        visit.page.wait_for_selector(".extraHTML svg.plot")
        assert visit.errors == [] and visit.requests == []
        marks = visit.marks()
        assert len(marks) >= 2 * 3 + 2 and all(n > 0 for n in marks), marks
        visit.shot(tmp_path / "pytest-html.png")
    finally:
        visit.close()


def test_the_band_words_the_count_tolerance_as_the_failure_text_does():
    """One wording of the tolerance (model/rules.py): a finding's 'max(3, 2.50%)' is the
    page's band label at the mean billed count."""
    from pytest_tokaudit.checks.record import count_finding
    from pytest_tokaudit.model.figures import Figures
    from pytest_tokaudit.outputs.html import diff_chart

    contract = Contract.from_json({"tokaudit_count_abs": "3", "tokaudit_count_rel": "2.5%"}, "pytest.ini")
    finding = count_finding("count", 1234, 1000, contract)
    assert finding is not None and finding.message.endswith("> max(3, 2.50%)"), finding
    band = diff_chart(Figures(), contract, 1234.0, "differences")
    assert "|billed - counted| &lt;= max(3, 2.50% x 1,234) = 30.9" in band
