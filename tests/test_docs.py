"""The docs stay true: the site (mkdocs.yml, docs/) builds with --strict, so a broken link,
a missing anchor, a page left out of the nav or a missing snippet fails the suite; and every
ini snippet and pytest command in README.md and docs/*.md runs (below)."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import forkrun
from conftest import RUN_TIMEOUT, UNRELATED_PLUGINS, assert_no_crash

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


def test_the_readme_links_resolve():
    """README.md is read on the forge, not built: its links to docs/ and files must exist."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    assert links
    for link in links:
        if "://" in link:
            continue
        target, _, anchor = link.partition("#")
        assert (ROOT / target).exists(), link
        if anchor:
            # the heading's anchor as mkdocs' toc writes it (lower case, spaces as hyphens)
            headings = re.findall(r"^#+ (.+)$", (ROOT / target).read_text(encoding="utf-8"), re.M)
            assert anchor in {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}, link


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


# -- every ini snippet and every pytest command in the docs runs ---------------------------
#
# Collected from README.md and docs/*.md (fenced blocks):
# - each ```ini block (and ```toml block with a [tool.pytest...] table) is the ini file of a
#   copy of example_project/ (its tokenizer, manifest and data), and must be accepted:
#   pytest's configure (the plugin's contract) raises no UsageError, and every key it sets
#   is one pytest knows (`config.getini` of a key nobody registered raises);
# - each command that runs pytest, `python -m pytest` or `python -m pytest_tokaudit` in
#   any other block (shell lines, `&&` chains, a YAML `run:` or `entry:`) runs, in order
#   with the rest of its block, in a copy of example_project/: exit 0 or 1 (the example's
#   data is red by design), never a usage error, an internal error or "no tests". A local
#   path the example lacks (data/part1) is made as a folder with one of its data files; a
#   command naming a URL (no network here) is parsed and configured in process instead.
# Install, venv, nox and benchmark lines are not run here: .ci/run installs from the clone
# and .ci/release-check from the wheel.
# A block that cannot run as written is marked just before it in the doc with
# `<!-- not-tested: reason -->`; NOT_TESTED lists every such marker, so a new one is seen.

NOT_TESTED = {
    ("README.md", "the whole test suite: what .ci/run runs"),
    ("docs/ci.md", "needs a published release tag"),
    ("docs/past-one-machine.md", "needs a Ray cluster at that address"),
    ("README.md", "needs a Ray cluster at that address"),
}

EXAMPLE = ROOT / "example_project"
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
_NOT_TESTED = re.compile(r"^\s*<!--\s*not-tested:\s*(?P<reason>.+?)\s*-->\s*$")
# Options whose value may follow as the next argument (the docs' commands use these).
_VALUE_OPTIONS = {"-n", "-o", "-k", "-m", "-p", "-c", "-W", "--dist", "--plugin"}


@dataclasses.dataclass
class Block:
    doc: str          # path from the repository root
    line: int         # of the opening fence, 1-based
    lang: str
    text: str
    not_tested: str | None

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def doc_blocks() -> list[Block]:
    blocks = []
    for path in DOC_FILES:
        lines = path.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            m = _FENCE.match(lines[i])
            if not m:
                i += 1
                continue
            start, fence = i, m.group("fence")
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip().startswith(fence)), len(lines))
            before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
            marker = _NOT_TESTED.match(before)
            blocks.append(Block(
                doc=path.relative_to(ROOT).as_posix(), line=start + 1, lang=m.group("lang").lower(),
                text=textwrap.dedent("\n".join(lines[start + 1:end])) + "\n",
                not_tested=marker.group("reason") if marker else None,
            ))
            i = end + 1
    return blocks


BLOCKS = doc_blocks()


def is_ini(block: Block) -> bool:
    return block.lang == "ini" or (block.lang == "toml" and "[tool.pytest" in block.text)


def commands(block: Block) -> list[list[str]]:
    """The pytest invocations of a block, as argv lists, in order."""
    found = []
    for raw in block.text.splitlines():
        line = re.sub(r"^\s*(?:\$ |- )?(?:run:|entry:)?\s*", "", raw)
        for part in line.split("&&"):
            # `(cd example_project && pytest --tokaudit)`: the subshell keeps the caller's folder
            part = part.strip().removeprefix("(").removesuffix(")")
            try:
                argv = shlex.split(part, comments=True)
            except ValueError:
                continue
            if argv[:1] == ["pytest"] or argv[:3] in (["python", "-m", "pytest"], ["python", "-m", "pytest_tokaudit"]):
                found.append(argv)
    return found


INI_BLOCKS = [b for b in BLOCKS if is_ini(b) and not b.not_tested]
COMMAND_BLOCKS = [b for b in BLOCKS if not is_ini(b) and commands(b) and not b.not_tested]


def test_the_blocks_not_tested_are_the_listed_ones():
    assert {(b.doc, b.not_tested) for b in BLOCKS if b.not_tested} == NOT_TESTED
    assert INI_BLOCKS and COMMAND_BLOCKS


def example_copy(pytester: pytest.Pytester) -> Path:
    """The example project, its tokenizer linked, not copied: an in-process run then loads
    it once per worker (load_tokenizer keeps each resolved directory's), not once per test."""
    shutil.copytree(EXAMPLE, pytester.path, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", "tokenizer"))
    if not (pytester.path / "tokenizer").exists():
        (pytester.path / "tokenizer").symlink_to(EXAMPLE / "tokenizer", target_is_directory=True)
    return pytester.path


def check_ini(pytester: pytest.Pytester, lang: str, text: str) -> None:
    """The snippet as the project's ini file is accepted, and every key it sets is known."""
    root = example_copy(pytester)
    (root / "pytest.ini").unlink()
    if lang == "toml":
        (root / "pyproject.toml").write_text(text)
        keys = re.findall(r"^\s*([\w.-]+)\s*=", text.split("[tool.pytest", 1)[1], re.M)
    else:
        name = "setup.cfg" if "[tool:pytest]" in text else "pytest.ini"
        (root / name).write_text(text if re.search(r"^\[", text, re.M) else "[pytest]\n" + text)
        keys = re.findall(r"^([\w.-]+)\s*=", text, re.M)
    assert keys, text
    config = pytester.parseconfigure("--tokaudit", "-p", "no:xdist")
    unknown = []
    for key in keys:
        try:
            config.getini(key)
        except ValueError:
            unknown.append(key)
    assert not unknown, f"unknown ini keys {unknown} in:\n{text}"


@pytest.mark.parametrize("block", INI_BLOCKS, ids=[b.id for b in INI_BLOCKS])
def test_an_ini_snippet_is_accepted(pytester: pytest.Pytester, block: Block):
    check_ini(pytester, block.lang, block.text)


@pytest.mark.parametrize("text, error", [
    ("[pytest]\ntokaudit_count_feild = usage.completion_tokens\n", "tokaudit_count_feild"),
    ("[pytest]\ntokaudit_count_rel = lots\n", "tokaudit_count_rel"),
])
def test_a_wrong_ini_snippet_is_refused(pytester: pytest.Pytester, text: str, error: str):
    # A misspelt key: unknown to pytest here, or a usage error of its own (issue #24).
    with pytest.raises((pytest.UsageError, AssertionError)) as info:
        check_ini(pytester, "ini", text)
    assert error in str(info.value)


def run_commands(pytester: pytest.Pytester, argvs: list[list[str]]) -> list[str]:
    """Each command in order in a copy of the example project; what each was checked by."""
    root = example_copy(pytester)
    done = []
    for argv in argvs:
        module = "pytest_tokaudit" if argv[:3] == ["python", "-m", "pytest_tokaudit"] else "pytest"
        args = argv[1:] if argv[0] == "pytest" else argv[3:]
        positional = [a for i, a in enumerate(args)
                      if not a.startswith("-") and (i == 0 or args[i - 1] not in _VALUE_OPTIONS)]
        shown = " ".join(argv)
        if any("://" in a for a in positional):
            pytester.parseconfigure(*args, "-p", "no:xdist")  # raises on any usage error
            done.append(f"configured: {shown}")
            continue
        if module == "pytest":
            for arg in positional:
                if not (root / arg).exists():
                    (root / arg).mkdir(parents=True)
                    shutil.copy(root / "data" / "api_batch_001.jsonl", root / arg)
            result = forkrun.runpytest(pytester, *args, *UNRELATED_PLUGINS, timeout=RUN_TIMEOUT)
        else:
            result = pytester.run(sys.executable, "-m", module, *args, timeout=RUN_TIMEOUT)
        assert_no_crash(result)
        assert result.ret in (0, 1), f"{shown}: exit {result.ret}\n{result.stdout.str()}\n{result.stderr.str()}"
        done.append(f"ran (exit {result.ret}): {shown}")
    return done


@pytest.mark.parametrize("block", COMMAND_BLOCKS, ids=[b.id for b in COMMAND_BLOCKS])
def test_the_commands_of_a_block_run(pytester: pytest.Pytester, block: Block):
    done = run_commands(pytester, commands(block))
    assert len(done) == len(commands(block))


def test_a_wrong_command_is_refused(pytester: pytest.Pytester):
    with pytest.raises(AssertionError, match="exit 4"):
        run_commands(pytester, [["pytest", "--tokaudit", "data/", "--tokaudit-jsn=audit.json"]])
    with pytest.raises(pytest.UsageError):
        run_commands(pytester, [["pytest", "--tokaudit", "s3://bucket/data/", "--tokaudit-annotations=always"]])


# Every ```python block of docs/api.md runs as written, each in a fresh copy of the example
# project (the page's file examples read its ini file and data): exit 0, its asserts held.
API_BLOCKS = [b for b in BLOCKS if b.doc == "docs/api.md" and b.lang == "python"]


def test_the_api_page_has_examples_to_run():
    assert len(API_BLOCKS) >= 3
    assert any("audit.add(" in b.text and "break" in b.text for b in API_BLOCKS)


@pytest.mark.parametrize("block", API_BLOCKS, ids=[b.id for b in API_BLOCKS])
def test_an_api_example_runs(pytester: pytest.Pytester, block: Block):
    root = example_copy(pytester)
    script = root / "example.py"
    script.write_text(block.text, encoding="utf-8")
    result = pytester.run(sys.executable, str(script), timeout=RUN_TIMEOUT)
    assert result.ret == 0, f"{block.id}:\n{result.stdout.str()}\n{result.stderr.str()}"


def test_the_local_pre_commit_hook_runs_the_published_hook():
    """The docs' `repo: local` hook (for before a release tag) is .pre-commit-hooks.yaml's."""
    import yaml

    published = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())[0]
    local = [b for b in BLOCKS if b.lang == "yaml" and "repo: local" in b.text]
    assert local
    for block in local:
        hook = yaml.safe_load(block.text)["repos"][0]["hooks"][0]
        for key in ("id", "name", "entry", "files", "pass_filenames", "require_serial"):
            assert hook[key] == published[key], (block.id, key)
