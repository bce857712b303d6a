"""Record-id bookkeeping (pytest_tokaudit.ids): keys, repeats, their report order, memory,
and the expected-ids manifest."""

from __future__ import annotations

import gc
import itertools
import random
import sys
import tracemalloc

import pytest

from conftest import UNRELATED_PLUGINS, TokProject, rec
from pytest_tokaudit import ids as ids_module
from pytest_tokaudit.contract import Contract
from pytest_tokaudit.dataset import DUPLICATES_SHOWN, evaluate
from pytest_tokaudit.ids import IdIndex, read_manifest
from pytest_tokaudit.summary import FileSummary

FAILED = pytest.ExitCode.TESTS_FAILED
CONTRACT = Contract.from_json({"tokaudit_unique_ids": "true"})


def summary(path: str, ids: list, lines: list[int] | None = None, shard: int | None = None):
    return FileSummary(path=path, shard=shard, ids=list(ids),
                       id_lines=list(lines) if lines is not None else list(range(1, len(ids) + 1)))


def index_of(*summaries: FileSummary, **kw) -> IdIndex:
    index = IdIndex(**kw)
    for s in summaries:
        index.add(s)
    return index


def unique_ids(index: IdIndex):
    (outcome,) = evaluate([], index, CONTRACT, None)
    return outcome


# -- 4: the manifest ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, line, why", [
    ('{"id": 1}\n', 1, "no field 'sample_id'"),
    ('{"sample_id": 1}\n\n{"other": 2}\n', 3, "no field 'sample_id'"),
    ("1\n1.5\n", 2, "sample_id must be a string or integer, found float"),
    ("true\n", 1, "sample_id must be a string or integer, found bool"),
    ("null\n", 1, "sample_id must be a string or integer, found null"),
    ("[1, 2]\n", 1, "sample_id must be a string or integer, found list"),
    ('{"sample_id": [1]}\n', 1, "sample_id must be a string or integer, found list"),
    ('{"sample_id": 1\n', 1, "not valid JSON"),
    ('"abc\n', 1, "not valid JSON"),
])
def test_a_manifest_line_without_a_usable_id_is_an_error_naming_it(tmp_path, text, line, why):
    path = tmp_path / "manifest.txt"
    path.write_text(text)
    with pytest.raises(ValueError) as exc:
        list(read_manifest(path, ("sample_id",)))
    assert str(exc.value).startswith(f"{path}:{line}: {why}"), str(exc.value)


def test_a_manifest_line_that_is_not_utf8_is_an_error(tmp_path):
    path = tmp_path / "manifest.txt"
    path.write_bytes(b"abc\n\xff\xfe\n")
    with pytest.raises(ValueError, match=r"manifest.txt:2: not UTF-8"):
        list(read_manifest(path, ("sample_id",)))


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_a_manifest_without_ids_is_an_error(tmp_path, text):
    path = tmp_path / "manifest.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=r"manifest.txt: no ids$"):
        list(read_manifest(path, ("sample_id",)))


def test_manifest_lines_objects_json_values_and_bare_text(tmp_path):
    path = tmp_path / "manifest.txt"
    path.write_text('{"meta": {"id": 7}}\n3\n"x-1"\nplain-id-9\n\n  -4  \n{"meta": {"id": "s"}}\n')
    assert list(read_manifest(path, ("meta", "id"))) == [7, 3, "x-1", "plain-id-9", -4, "s"]


def run_manifest(pytester: pytest.Pytester, manifest: str) -> pytest.RunResult:
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini(tokaudit_expected_ids="manifest.txt")
    project.jsonl("data/a.jsonl", [rec(1), rec(2)])
    project.write("manifest.txt", manifest)
    return project.run("-rA")


def test_a_manifest_of_objects_without_the_id_field_fails_the_check(pytester: pytest.Pytester):
    result = run_manifest(pytester, '{"id": 1}\n{"id": 2}\n')
    assert result.ret == FAILED
    result.stdout.fnmatch_lines(
        ["*tokaudit::expected_ids: failed: cannot use the manifest: *manifest.txt:1: "
         "no field 'sample_id'"])
    assert "expected ids have a record" not in result.stdout.str()


def test_an_empty_manifest_fails_the_check(pytester: pytest.Pytester):
    result = run_manifest(pytester, "\n")
    assert result.ret == FAILED
    result.stdout.fnmatch_lines(
        ["*tokaudit::expected_ids: failed: cannot use the manifest: *manifest.txt: no ids"])
