"""Time to build the HTML report of 10,000 files, and to open it in a browser.

    python benchmarks/html_pages.py [--files 10000] [--chromium /usr/bin/chromium]

Builds the page for `--files` summaries of 40 records each (as
tests/outputs/test_html.py does), prints its size and the build time, and, where chromium
and Playwright are installed, the time until the page says it is ready
(`body[data-ready='1']`), opened offline. The suite asserts what keeps the page fast (its
size, one table page of 50 rows drawn, every plot drawn), not how fast: a shared CI
runner's time says little.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from pytest_tokaudit.model.contract import Contract
from pytest_tokaudit.model.outcome import Outcome
from pytest_tokaudit.model.summary import FileSummary
from pytest_tokaudit.outputs.html import build


def summaries(n: int) -> list[FileSummary]:
    files = []
    for k in range(n):
        s = FileSummary(path=f"data/part-{k // 500:03d}/batch-{k:05d}.jsonl", complete=True)
        for line in range(1, 41):
            billed = 200 + (k * 7 + line * 13) % 300
            s.add_counts(line, f"s-{k}-{line}", billed, billed + (line * k) % 5 - 2)
            s.records += 1
            s.audited += 1
        files.append(s)
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--chromium", type=Path, default=Path("/usr/bin/chromium"))
    args = parser.parse_args()
    files = summaries(args.files)
    contract = Contract.from_json({"tokaudit_budget": "9000000"}, "pytest.ini")
    started = time.perf_counter()
    page = build(files, [Outcome("coverage", "passed", f"{args.files:,} files")], contract, 0, None)
    print(f"{args.files:,} files: {len(page.encode()):,} bytes, built in "
          f"{time.perf_counter() - started:.2f} s")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("no playwright: not opened")
        return
    if not args.chromium.exists():
        print(f"no browser at {args.chromium}: not opened")
        return
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        path = Path(tmp, "big.html")
        path.write_text(page, "utf-8")
        browser = pw.chromium.launch(executable_path=str(args.chromium),
                                     args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
        url = path.resolve().as_uri()
        context = browser.new_context(viewport={"width": 1300, "height": 900})
        tab = context.new_page()
        tab.route("**/*", lambda r: r.continue_() if r.request.url == url else r.abort())
        started = time.perf_counter()
        tab.goto(url)
        tab.wait_for_selector("body[data-ready='1']", state="attached")
        print(f"opened in {time.perf_counter() - started:.2f} s")
        browser.close()


if __name__ == "__main__":
    main()
