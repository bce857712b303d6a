"""The documentation site (mkdocs.yml, docs/) builds with --strict: a broken link, a missing
anchor, a page left out of the nav or a missing snippet fails the suite."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def build_site(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    # NO_MKDOCS_2_WARNING: mkdocs-material's notice about MkDocs 2.0, not about these docs.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"),
         "-d", str(site)],
        cwd=site.parent, env=env, capture_output=True, text=True, timeout=120,
    )


def test_the_site_builds_strictly(tmp_path: Path):
    result = build_site(ROOT, tmp_path / "site")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "WARNING" not in out, out
    pages = {p.parent.name for p in (tmp_path / "site").glob("*/index.html")}
    docs = {p.stem for p in (ROOT / "docs").glob("*.md")} - {"index"}
    assert pages >= docs, docs - pages


def copy_docs(tmp_path: Path) -> Path:
    """What the site is built from, in a folder of its own."""
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", root / "docs")
    for name in ("mkdocs.yml", "README.md", "CHANGELOG.md"):
        shutil.copy(ROOT / name, root / name)
    return root


@pytest.mark.parametrize("text, warning", [
    ("[gone](no-such-page.md)", "contains a link 'no-such-page.md', but the target is not found"),
    ("[gone](install.md#no-such-anchor)", "does not contain an anchor '#no-such-anchor'"),
    ("[outside](../README.md)", "contains a link '../README.md', but the target is not found"),
])
def test_a_broken_link_fails_the_build(tmp_path: Path, text: str, warning: str):
    root = copy_docs(tmp_path)
    with open(root / "docs" / "index.md", "a", encoding="utf-8") as f:
        f.write(f"\n{text}\n")
    result = build_site(root, tmp_path / "site")
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert warning in out, out
    assert "Aborted with 1 warnings in strict mode!" in out, out


def test_a_page_left_out_of_the_nav_fails_the_build(tmp_path: Path):
    root = copy_docs(tmp_path)
    (root / "docs" / "orphan.md").write_text("# Orphan\n")
    result = build_site(root, tmp_path / "site")
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "orphan.md" in out, out
