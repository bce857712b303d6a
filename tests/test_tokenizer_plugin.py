"""The tokenizer end to end, through pytest --tokaudit with the real Qwen3 tokenizer loaded
from disk: a directory that cannot be used is a usage error, and an audit that needs no
tokenizer never imports transformers. Token names and the round trip: checks/test_structure.py
and checks/test_roundtrip.py."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import TokProject
from tokdata import qwen_dir

USAGE = pytest.ExitCode.USAGE_ERROR


def test_tokenizer_directory_problems_are_usage_errors(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.jsonl("data/a.jsonl", [])
    project.ini(tokaudit_tokenizer="no/such/dir", tokaudit_roundtrip_rel="5%")
    result = project.run()
    assert result.ret == USAGE
    result.stderr.fnmatch_lines([f"*tokenizer directory {pytester.path}/no/such/dir does not exist*"])

    # The command line overrides the ini file, relative to where pytest runs.
    assert project.run(f"--tokaudit-tokenizer={qwen_dir()}", "-o", "tokaudit_allow_empty=1").ret == 0

    # A tokenizer that brings its own code needs the opt-in.
    remote = pytester.path / "remote"
    remote.mkdir()
    (remote / "tokenizer.json").symlink_to(qwen_dir() / "tokenizer.json")
    config = json.loads((qwen_dir() / "tokenizer_config.json").read_text())
    config["auto_map"] = {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]}
    (remote / "tokenizer_config.json").write_text(json.dumps(config))
    project.ini(tokaudit_tokenizer="remote", tokaudit_roundtrip_rel="5%")
    result = project.run()
    assert result.ret == USAGE
    result.stderr.fnmatch_lines(["*needs remote code (tokenization_kimi.py)*tokaudit_trust_remote_code = true*"])

    # Without a tokenizer, the round trip cannot run: say so before auditing anything.
    project.ini(tokaudit_roundtrip_rel="5%")
    result = project.run()
    assert result.ret == USAGE
    result.stderr.fnmatch_lines(["*tokaudit_roundtrip_rel needs a tokenizer*"])
    shutil.rmtree(remote)


def test_count_only_audit_never_imports_transformers(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini(tokaudit_allow_empty="true")
    project.jsonl("data/a.jsonl", [])
    project.write("conftest.py", (
        "import sys\n"
        "def pytest_sessionfinish():\n"
        "    assert 'transformers' not in sys.modules, 'transformers was imported'\n"
    ))
    result = project.run()
    assert result.ret == 0, result.stdout.str()
