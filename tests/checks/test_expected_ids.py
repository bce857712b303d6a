"""tokaudit_expected_ids (checks/dataset.py): the manifest of the ids a dataset must hold,
read line by line (objects, JSON values, bare text); a manifest that cannot be used fails the
check, naming the line. The index it judges by: test_unique_ids.py."""

from __future__ import annotations

import pytest

from conftest import TokProject, rec
from pytest_tokaudit.model.idindex import read_manifest

FAILED = pytest.ExitCode.TESTS_FAILED


# -- the manifest -----------------------------------------------------------------------------

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
