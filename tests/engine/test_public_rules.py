"""One truth for how a record is judged: every module of the package reaches another's
rules through public names only (issue #32), so the JSONL and Arrow passes share them."""

import ast
from pathlib import Path

import pytest_tokaudit

PACKAGE = Path(pytest_tokaudit.__file__).parent

def private_imports() -> set[tuple[str, str]]:
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.add((path.relative_to(PACKAGE).as_posix(), alias.name))
    return found


def test_no_module_imports_another_modules_private_name():
    assert private_imports() == set()


def test_the_arrow_pass_judges_records_with_the_parse_rules():
    from pytest_tokaudit.engine import arrow
    from pytest_tokaudit.sources import parse

    for name in ("judge_fields", "count_problem", "id_problem", "template_texts", "check_ids",
                 "sum_terms", "rejected"):
        assert getattr(arrow, name) is getattr(parse, name)
