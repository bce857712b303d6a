"""Make docs/report.png, the README's picture of --tokaudit-html, from the example project.

    pip install -e '.[test]' && python docs/make_screenshot.py    # needs /usr/bin/chromium

Copies example_project/ to a temporary folder, audits it with `tokaudit_group_by = model`
(one ini key more than its pytest.ini, so the plots are split by model) and the page written
to report.html, opens that page offline in Debian's chromium through Playwright (every
request but the file's own blocked), fails on any console error or request, and saves the
top of the page. Prints where the page and the picture are.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "report.png"))
    parser.add_argument("--height", type=int, default=1500, help="pixels of the page shown")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tokaudit-shot-"))
    project = work / "example_project"
    shutil.copytree(ROOT / "example_project", project)
    page = project / "report.html"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--tokaudit", "-q", "-p", "no:randomly",
         "-o", "tokaudit_group_by=model", f"--tokaudit-html={page}"],
        cwd=project, capture_output=True, text=True)
    if run.returncode not in (0, 1) or not page.exists():  # the example is red on purpose
        print(run.stdout, run.stderr, file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright

    url = page.as_uri()
    problems: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic"])
        tab = browser.new_page(viewport={"width": 1000, "height": args.height})
        tab.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        tab.on("request", lambda r: problems.append(f"request {r.url}") if r.url != url else None)
        tab.route("**/*", lambda r: r.continue_() if r.request.url == url else r.abort())
        tab.goto(url)
        tab.wait_for_selector("body[data-ready='1']", state="attached")
        tab.screenshot(path=args.out, clip={"x": 0, "y": 0, "width": 1000, "height": args.height})
        browser.close()
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    print(f"page: {page}\nscreenshot: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
