"""One usage error (exit 4, `ERROR: message` on one line, no traceback) for a tokenizer
that cannot load, wherever it is named (the ini file, -o, --tokaudit-tokenizer, a folder's
pytest_tokaudit_contract hook), and for a feature whose extra is not installed, naming the
extra. A missing module is simulated in the subprocess by a conftest.py that sets
`sys.modules[name] = None` (importing it then raises ImportError, as if not installed).
"""

from __future__ import annotations

import re

import pytest

from conftest import TokProject, assert_usage_error, rec

USAGE = pytest.ExitCode.USAGE_ERROR
MISSING = "r50k_base: no local copy (nothing is downloaded)"  # no package ships r50k_base


def block(project: TokProject, *modules: str) -> None:
    """As if `modules` were not installed, in the runs (and their xdist workers)."""
    project.write("conftest.py", "import sys\n\n" + "".join(
        f"sys.modules[{m!r}] = None\n" for m in modules))


@pytest.fixture
def offline_cache(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))


# -- a tokenizer that cannot load, wherever it is named -----------------------------------

@pytest.mark.parametrize("place", ["ini", "-o", "--tokaudit-tokenizer"])
def test_a_tokenizer_that_cannot_load_is_a_usage_error_from_the_command_line_or_ini(
        project: TokProject, offline_cache: None, place: str):
    project.jsonl("data/a.jsonl", [rec(1)])
    if place == "ini":
        project.ini(tokaudit_tokenizer="tiktoken:r50k_base", tokaudit_roundtrip_rel="0%")
        args: tuple[str, ...] = ()
    else:
        project.ini(tokaudit_roundtrip_rel="0%")
        args = (("-o", "tokaudit_tokenizer=tiktoken:r50k_base") if place == "-o"
                else ("--tokaudit-tokenizer=tiktoken:r50k_base",))
    result = project.run(*args)
    where = {"ini": "pytest.ini"}.get(place, place)
    assert_usage_error(result, f"tokaudit_tokenizer ({where}): {MISSING}")


@pytest.mark.parametrize("replace, message", [
    # The folder's tokenizer, loaded as the ini's is at start: a missing encoding file...
    ("tokenizer='tiktoken:r50k_base'", MISSING),
    # ...a directory that is not there (no check needs it loaded: it must still be there)...
    ("tokenizer='no/such/tokenizer', roundtrip_rel=None",
     "tokenizer directory no/such/tokenizer does not exist"),
    # ...and one that fails inside the hook, where replace() resolves a token name with it.
    ("tokenizer='tiktoken:r50k_base', require_last=('<|endoftext|>',)", MISSING),
])
def test_a_folder_contract_naming_a_tokenizer_that_cannot_load_is_the_same_usage_error(
        project: TokProject, offline_cache: None, replace: str, message: str):
    """Not a pluggy traceback of 1,669 lines (exit 1): the ini's one line, naming the file."""
    project.ini(tokaudit_tokenizer="tiktoken:o200k_base", tokaudit_roundtrip_rel="0%")
    project.jsonl("data/ok/a.jsonl", [rec(1)])
    project.jsonl("data/local/b.jsonl", [rec(2)])
    project.write("data/local/conftest.py", (
        "def pytest_tokaudit_contract(path, contract):\n"
        f"    return contract.replace({replace})\n"
    ))
    expected = f"tokaudit_tokenizer (pytest_tokaudit_contract for data/local/b.jsonl): {message}"
    assert_usage_error(project.run(), expected)
    if "require_last" in replace and "no:xdist" in project.mode:
        # Under xdist the workers collect: the controller stops the run with the same line.
        project.mode = ("-n", "2")
        assert_usage_error(project.run(), expected)


# -- a feature whose extra is missing ------------------------------------------------------

def test_the_round_trip_without_rapidfuzz_names_the_extra(project: TokProject):
    """With only [tiktoken] installed before, tokaudit_roundtrip_rel crashed every file with
    ModuleNotFoundError: rapidfuzz (the extra now brings it)."""
    block(project, "rapidfuzz")
    project.jsonl("data/a.jsonl", [rec(1)])
    project.ini(tokaudit_tokenizer="tiktoken:o200k_base", tokaudit_roundtrip_rel="0%")
    assert_usage_error(project.run(), "tokaudit_roundtrip_rel needs rapidfuzz, which is not "
                                      "installed here: pip install 'pytest-tokaudit[tiktoken]'")
    # Switched on by a folder's contract: the same error, for that folder's file.
    project.ini(tokaudit_tokenizer="tiktoken:o200k_base")
    project.write("data/conftest.py", (
        "def pytest_tokaudit_contract(path, contract):\n"
        "    return contract.replace(roundtrip_rel='1%')\n"
    ))
    assert_usage_error(project.run(), "pytest_tokaudit_contract for data/a.jsonl): "
                                      "tokaudit_roundtrip_rel needs rapidfuzz")


@pytest.mark.parametrize("module, name, extra", [
    ("pyarrow", "data/a.parquet", "parquet"),
    ("pyarrow", "data/a.arrow", "parquet"),
    ("zstandard", "data/a.jsonl.zst", "zstd"),
])
def test_a_file_whose_reader_is_not_installed_names_the_extra(project: TokProject, module: str,
                                                              name: str, extra: str):
    block(project, module)
    project.ini()
    project.jsonl("data/b.jsonl", [rec(2)])
    project.write(name, b"not read: the run stops before any file is")
    assert_usage_error(project.run(), f"ERROR: {name}: reading ",
                       f"files needs {module}, which is not installed here: "
                       f"pip install 'pytest-tokaudit[{extra}]'")


def test_a_tokenizer_directory_without_transformers_names_the_extra(project: TokProject):
    """Qwen3's tokenizer.json is read with `tokenizers` alone; without it (and without
    transformers, which needs it), the directory cannot load."""
    from tokdata import qwen_dir

    block(project, "tokenizers", "transformers")
    project.jsonl("data/a.jsonl", [rec(1)])
    project.ini(tokaudit_tokenizer=qwen_dir(), tokaudit_require_last="<|im_end|>")
    assert_usage_error(project.run(), "transformers is not installed: "
                                      "pip install 'pytest-tokaudit[tokenizer]'")


def test_the_prompt_audit_without_jinja2_names_the_extra(project: TokProject):
    """transformers renders a chat template with jinja2, which it does not require: without
    it, every record's prompt count failed at run time (the extra now brings it)."""
    from tokdata import qwen_dir

    block(project, "jinja2")
    project.jsonl("data/a.jsonl", [rec(1)])
    project.ini(tokaudit_tokenizer=qwen_dir(), tokaudit_prompt_messages="request.messages")
    assert_usage_error(project.run(), "renders the chat template with jinja2, which is not "
                                      "installed here: pip install 'pytest-tokaudit[tokenizer]'")


def test_remote_code_over_tiktoken_without_tiktoken_names_the_extra(project: TokProject):
    """A Kimi-shaped directory (its code imports tiktoken) on a machine with [tokenizer] only."""
    import base64
    import shutil
    from pathlib import Path

    toy = Path(__file__).parent.parent / "tokenizers" / "data" / "remote_toy"
    shutil.copytree(toy, project.path / "tok")
    (project.path / "tok" / "tiktoken.model").write_bytes(
        b"".join(base64.b64encode(bytes([i])) + b" %d\n" % i for i in range(256)))
    block(project, "tiktoken")
    project.jsonl("data/a.jsonl", [rec(1)])
    project.ini(tokaudit_tokenizer="tok", tokaudit_trust_remote_code="true",
                tokaudit_roundtrip_rel="0%")
    assert_usage_error(project.run(), "cannot load the tokenizer in ",
                       "pip install 'pytest-tokaudit[tiktoken]'")
