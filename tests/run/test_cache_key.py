"""The cache key is what the process loaded, not what a hook's code mentions (issue #31,
items 1-4): every module loaded from outside the standard library (its source), the
versions of the installed distributions modules come from, the tokenizer directory's whole
tree, and the inputs a project declares (tokaudit_cache_inputs).

Each case: a warm run after an edit must give the verdict of a run without the cache.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import FULL, XDIST_MODES, Run, TokProject, assert_no_crash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ONE_PROCESS = pytest.mark.parametrize("xdist_mode", [XDIST_MODES["no-xdist"]], ids=["no-xdist"])


def records(n: int = 3, ids: int = 5) -> list[dict]:
    return [{"sample_id": i, "completion_tokens": ids, "output_ids": list(range(1, ids + 1))}
            for i in range(n)]


def cache_report(project: TokProject) -> dict:
    return json.loads((project.path / "audit.json").read_text())["cache"]


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new))
    for folder in path.parent.rglob("__pycache__"):  # an edit within the same second
        for pyc in folder.iterdir():
            pyc.unlink()


def assert_warm_is_cold(project: TokProject, *args: str) -> pytest.RunResult:
    """After the edit: the cached run's exit status is a run's without the cache, which
    fails (the edit made the check stricter)."""
    warm = project.run("--tokaudit-json=audit.json", *args)
    assert_no_crash(warm)
    cold = project.run("--tokaudit-no-cache", *args)
    assert cold.ret == pytest.ExitCode.TESTS_FAILED, cold.stdout.str()
    assert warm.ret == cold.ret, warm.stdout.str()
    assert cache_report(project)["items"] == []
    return warm


def first_runs(project: TokProject, *args: str) -> None:
    """A cold run and a warm one, both green, the second served by the cache."""
    project.settle()
    first = project.run("--tokaudit-json=audit.json", *args)
    assert_no_crash(first)
    assert first.ret == pytest.ExitCode.OK, first.stdout.str()
    warm = project.run("--tokaudit-json=audit.json", *args)
    assert warm.ret == pytest.ExitCode.OK, warm.stdout.str()
    assert cache_report(project)["items"] == ["data/a.jsonl::tokaudit"], warm.stdout.str()


@ONE_PROCESS
def test_a_helper_imported_inside_the_hook_is_keyed(project: TokProject):
    """Item 1: `from helpers import too_long` in the hook's body: the helper module is
    loaded during the audit, and an edit of it re-audits."""
    project.ini(tokaudit_count_mean_rel="")
    project.jsonl("data/a.jsonl", records())
    project.write("helpers.py", "def too_long(record):\n    return None\n")
    project.write("conftest.py", """
def pytest_tokaudit_check_record(record):
    from helpers import too_long
    return too_long(record)
""")
    first_runs(project)
    edit(project.path / "helpers.py", "return None", "return 'edited: too long'")
    assert_warm_is_cold(project)


SITE_PLUGIN = {
    "tokcheck/__init__.py": """
from . import limits


def pytest_tokaudit_check_record(record):
    if record.n_ids > limits.LIMIT:
        return f"{record.n_ids} ids > {limits.LIMIT}"
""",
    "tokcheck/limits.py": "LIMIT = 100\n",
    "tokcheck-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tokcheck\nVersion: 1.0\n",
    "tokcheck-1.0.dist-info/entry_points.txt": "[pytest11]\ntokcheck = tokcheck\n",
    "tokcheck-1.0.dist-info/top_level.txt": "tokcheck\n",
    "tokcheck-1.0.dist-info/RECORD": "tokcheck/__init__.py,,\ntokcheck/limits.py,,\n",
}


def install_site_plugin(site: Path, version: str, limit: int) -> None:
    """The `tokcheck` distribution at `version`, a pytest11 plugin whose check's limit lives
    in its sibling module (an upgrade: the old version's files are gone)."""
    for old in site.glob("tokcheck*"):
        for f in sorted(old.rglob("*"), reverse=True):
            f.unlink() if f.is_file() else f.rmdir()
        old.rmdir()
    for name, text in SITE_PLUGIN.items():
        name = name.replace("1.0", version)
        text = text.replace("1.0", version).replace("LIMIT = 100", f"LIMIT = {limit}")
        path = site / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@ONE_PROCESS
def test_an_installed_plugin_upgraded_is_keyed_by_its_version(project: TokProject,
                                                             monkeypatch: pytest.MonkeyPatch):
    """Item 2: a check from an installed distribution whose limit lives in a sibling module:
    upgrading the distribution re-audits."""
    site = project.path / "env" / "site-packages"
    install_site_plugin(site, "1.0", 100)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]))
    project.ini(tokaudit_count_mean_rel="")
    project.jsonl("data/a.jsonl", records())
    first_runs(project)
    install_site_plugin(site, "2.0", 2)
    warm = assert_warm_is_cold(project)
    warm.stdout.fnmatch_lines(["*5 ids > 2*"])


@ONE_PROCESS
def test_a_value_read_through_a_package_chain_is_keyed(project: TokProject):
    """Item 3: `pkg.sub.deep.VALUE`: every module of the chain is loaded, so keyed."""
    project.ini(tokaudit_count_mean_rel="")
    project.jsonl("data/a.jsonl", records())
    project.write("pkg/__init__.py", "from . import sub\n")
    project.write("pkg/sub/__init__.py", "from . import deep\n")
    project.write("pkg/sub/deep.py", "VALUE = 100\n")
    project.write("conftest.py", """
import pkg


def pytest_tokaudit_check_record(record):
    if record.n_ids > pkg.sub.deep.VALUE:
        return "too many ids"
""")
    first_runs(project)
    edit(project.path / "pkg/sub/deep.py", "VALUE = 100", "VALUE = 2")
    assert_warm_is_cold(project)


TINY_TOKENIZER = '''
import json

from transformers import PreTrainedTokenizer


class TinyTokenizer(PreTrainedTokenizer):
    """Whitespace words; its vocabulary in a subfolder of the tokenizer directory."""

    vocab_files_names = {"vocab_file": "assets/vocab.json"}
    model_input_names = ["input_ids"]

    def __init__(self, vocab_file, **kwargs):
        with open(vocab_file) as fh:
            self.vocab = json.load(fh)
        self.inverse = {i: t for t, i in self.vocab.items()}
        super().__init__(**kwargs)

    @property
    def vocab_size(self):
        return len(self.vocab)

    def get_vocab(self):
        return dict(self.vocab)

    def _tokenize(self, text, **kwargs):
        return text.split()

    def _convert_token_to_id(self, token):
        return self.vocab.get(token, 0)

    def _convert_id_to_token(self, index):
        return self.inverse.get(index, "<unk>")

    def convert_tokens_to_string(self, tokens):
        return " ".join(tokens)

    def save_vocabulary(self, save_directory, filename_prefix=None):
        return ()
'''


@ONE_PROCESS
def test_a_tokenizer_file_in_a_subfolder_is_keyed(project: TokProject):
    """Item 4: a vocabulary in `assets/` of the tokenizer directory: the whole tree is keyed."""
    if importlib.util.find_spec("transformers") is None:  # not imported here: the runs do
        pytest.skip("the [tokenizer] extra is not installed")
    project.write("tok/tokenization_tiny.py", TINY_TOKENIZER)
    project.write("tok/tokenizer_config.json", json.dumps({
        "auto_map": {"AutoTokenizer": ["tokenization_tiny.TinyTokenizer", None]},
        "tokenizer_class": "TinyTokenizer", "unk_token": "<unk>"}))
    vocab = {"<unk>": 0, "a": 1, "b": 2, "c": 3, "d": 4, "e": 5}
    project.write("tok/assets/vocab.json", json.dumps(vocab))
    project.ini(tokaudit_count_mean_rel="", tokaudit_tokenizer="tok",
                tokaudit_trust_remote_code="true", tokaudit_roundtrip_rel="0")
    project.jsonl("data/a.jsonl", records())
    first_runs(project)
    del vocab["e"]  # id 5 is no longer in the vocabulary: the round trip fails
    project.write("tok/assets/vocab.json", json.dumps(vocab))
    assert_warm_is_cold(project)


@ONE_PROCESS
def test_declared_inputs_join_the_key(project: TokProject, monkeypatch: pytest.MonkeyPatch):
    """What a check reads at run time cannot be seen: tokaudit_cache_inputs declares it (a
    JSON of limits by glob, an environment variable), and a change of either re-audits."""
    project.ini(tokaudit_count_mean_rel="", tokaudit_cache_inputs="limits/**/*.json $TOK_LIMIT")
    project.jsonl("data/a.jsonl", records())
    project.write("limits/ids/max.json", json.dumps({"max": 100}))
    project.write("conftest.py", """
import json, os
from pathlib import Path


def pytest_tokaudit_check_record(record):
    limit = json.loads((Path(__file__).parent / "limits/ids/max.json").read_text())["max"]
    limit = min(limit, int(os.environ.get("TOK_LIMIT", "100")))
    if record.n_ids > limit:
        return f"{record.n_ids} ids > {limit}"
""")
    first_runs(project)
    project.write("limits/ids/max.json", json.dumps({"max": 2}))
    assert_warm_is_cold(project)
    project.write("limits/ids/max.json", json.dumps({"max": 100}))
    first_runs_again = project.run("--tokaudit-json=audit.json")
    assert first_runs_again.ret == pytest.ExitCode.OK  # the old key's entry, still right
    assert cache_report(project)["items"] == ["data/a.jsonl::tokaudit"]
    monkeypatch.setenv("TOK_LIMIT", "2")
    assert_warm_is_cold(project)
    entries = list((project.path / ".pytest_cache/d/tokaudit").rglob("*.json"))
    assert entries and not any(b"TOK_LIMIT\": \"2" in e.read_bytes() for e in entries)


# -- a property: cache on and cache off agree, whatever is edited where --------------------------

def chain(depth: int, lazy: list[bool], limit: int, tighten: int | None, prefix: str = "h") -> dict[str, str]:
    """conftest.py -> h0 -> h1 -> ... -> h{depth-1}, whose LIMIT the check applies; each import
    at module level or inside the function (lazy[i]); `tighten`: the module whose function
    caps the limit at 2 (an edit of a module in the middle of the chain). `prefix` names the
    modules (h0, h1, ...), one of its own per project sharing a process."""
    files = {}
    for i in range(depth):
        cap = "min(2, value)" if tighten == i else "value"
        if i == depth - 1:
            body = f"LIMIT = {limit}\n\n\ndef limit():\n    value = LIMIT\n    return {cap}\n"
        elif lazy[i + 1]:
            body = (f"def limit():\n    from {prefix}{i + 1} import limit as inner\n"
                    f"    value = inner()\n    return {cap}\n")
        else:
            body = (f"import {prefix}{i + 1}\n\n\ndef limit():\n    value = {prefix}{i + 1}.limit()\n"
                    f"    return {cap}\n")
        files[f"{prefix}{i}.py"] = body
    top = f"from {prefix}0 import limit\n" if not lazy[0] else ""
    files["conftest.py"] = (top + "\n\ndef pytest_tokaudit_check_record(record):\n"
                            + (f"    from {prefix}0 import limit\n" if lazy[0] else "")
                            + "    if record.n_ids > limit():\n        return 'too many ids'\n")
    return files


PROJECT = st.integers(1, 4).flatmap(lambda depth: st.tuples(
    st.just(depth),
    st.lists(st.booleans(), min_size=depth, max_size=depth),
    st.integers(0, depth - 1),  # the module edited
    st.sampled_from(["limit", "cap", "comment"]),  # how: the constant, a cap, nothing that counts
))

# In every example: two cases once lost (the helper imported inside the hook; a module in the
# middle of the chain, lazily imported), the cases the suite drew when each was a run of its
# own, and an edit that changes nothing that counts.
PINNED = [(2, [True, False], 1, "limit"), (3, [False, True, False], 1, "cap"),
          (4, [False, False, False, True], 0, "cap"), (1, [True], 0, "limit"),
          (3, [True, False, True], 2, "comment")]


@ONE_PROCESS
@settings(max_examples=12 if FULL else 1, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(cases=st.lists(PROJECT, min_size=1, max_size=4).map(lambda drawn: PINNED + drawn))
def test_cache_on_and_off_agree_after_any_edit_of_a_hook_dependency(project: TokProject, cases):
    """A generated hook project (a chain of helper modules, each imported at module level or
    inside a function), a random module of it edited: the cached run's verdict is the
    uncached run's.

    Several projects share a run, each in a folder of its own (data/cK/: its conftest.py,
    its modules hK_0, hK_1, ..., its a.jsonl); after a first run, each project's edit in
    turn, the earlier ones' kept, each followed by a cached run: its file has the verdict an
    uncached run gives it (red unless the edit was a comment), the projects not yet edited
    stay green; an uncached run at the end gives every file the last cached run's verdict."""
    for name in ("data", ".pytest_cache"):
        shutil.rmtree(project.path / name, ignore_errors=True)
    project.ini(tokaudit_count_mean_rel="")
    items = [f"data/c{k}/a.jsonl::tokaudit" for k in range(len(cases))]
    for k, (depth, lazy, at, how) in enumerate(cases):
        project.jsonl(f"data/c{k}/a.jsonl", records())
        for name, text in chain(depth, lazy, 100, None, f"h{k}_").items():
            project.write(f"data/c{k}/{name}", text)
    first = Run(project.run("-rA"))
    assert first.ret == pytest.ExitCode.OK, first
    warm = first
    for k, (depth, lazy, at, how) in enumerate(cases):
        if how == "limit":
            edited = chain(depth, lazy, 2, None, f"h{k}_")
        elif how == "cap":
            edited = chain(depth, lazy, 100, at, f"h{k}_")
        else:
            edited = {f"h{k}_{at}.py": chain(depth, lazy, 100, None, f"h{k}_")[f"h{k}_{at}.py"] + "# a comment\n"}
        for name, text in edited.items():
            project.write(f"data/c{k}/{name}", text)
        for folder in project.path.rglob("__pycache__"):
            shutil.rmtree(folder)
        warm = Run(project.run("-rA"))
        assert_no_crash(warm.result)
        assert warm.outcome(items[k]) == ("PASSED" if how == "comment" else "FAILED"), (cases[k], warm)
        assert all(warm.outcome(i) == "PASSED" for i in items[k + 1:]), (cases[k], warm)
    cold = Run(project.run("--tokaudit-no-cache", "-rA"))
    assert_no_crash(cold.result)
    assert warm.ret == cold.ret and warm.outcomes() == cold.outcomes(), (cases, warm, cold)
    assert [cold.outcome(i) for i in items] == [
        "PASSED" if how == "comment" else "FAILED" for _, _, _, how in cases], (cases, cold)


def test_the_plugins_own_source_is_keyed_whatever_the_memo_holds(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch):
    """The plugin's source is part of every key (an edited checkout is another version). The
    environment memo keeps its digest with each file's size and mtime, so a process reads
    the files only after one changed: an edit (even one of the same size), a new file, a
    removed one, or another version each give the digest of the files as they are."""
    from pytest_tokaudit.run import loaded

    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("A = 1\n")
    (package / "sub" / "b.py").write_text("B = 2\n")
    monkeypatch.setattr(loaded, "PACKAGE", str(package))
    memo = tmp_path / "environment.memo"

    def digest(version: str = "1.0") -> str:
        env = loaded.Environment(memo)
        env.packages()  # as a run's base does first: the memo is then written
        return env.code(version)

    def fresh(version: str = "1.0") -> str:  # no memo: every file read
        return loaded.Environment(None).code(version)

    first = digest()
    assert first == digest() == fresh() and "code" in json.loads(memo.read_bytes())
    seen = {first}
    stat = (package / "a.py").stat()
    (package / "a.py").write_text("A = 3\n")  # the same size...
    os.utime(package / "a.py", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # ...and a tick later
    for change in ("edit", "add", "remove", "version"):
        if change == "add":
            (package / "sub" / "c.py").write_text("")
        elif change == "remove":
            (package / "sub" / "b.py").unlink()
        version = "1.1" if change == "version" else "1.0"
        now = digest(version)
        assert now == fresh(version) and now not in seen, change
        seen.add(now)
