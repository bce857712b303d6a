"""The package's layers rule (README, "How it works"), checked by import-linter.

Imports run one way (entry > outputs > run > api > checks > engine > sources > model >
tokenizers > base), imports inside functions included; no package has an import cycle;
outputs read the run result, never the controller; nothing below run/ imports pytest. The contracts are in pyproject.toml.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command;"
         " sys.exit(lint_imports_command())", "--no-cache"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )


def test_the_package_keeps_its_layers():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 4 kept, 0 broken." in result.stdout


@pytest.mark.parametrize("module, line, broken", [
    # an upward import hidden inside a function: the contract must still see it
    ("model/summary.py", "def _up():\n    from ..outputs import terminal  # noqa\n",
     "pytest_tokaudit.model is not allowed to import pytest_tokaudit.outputs"),
    # an output that reads the controller
    ("outputs/github.py", "from ..run import controller  # noqa\n",
     "pytest_tokaudit.outputs is not allowed to import pytest_tokaudit.run.controller"),
    # pytest below run/: the public API would import it (a hook marker, a UsageError)
    ("checks/record.py", "def _usage():\n    import pytest  # noqa\n",
     "pytest_tokaudit.checks is not allowed to import pytest"),
    # two modules of one layer that import each other
    ("sources/base.py", "def _back():\n    from . import jsonl  # noqa\n",
     "No cycles are allowed in pytest_tokaudit.sources"),
])
def test_a_back_import_breaks_the_contract(tmp_path: Path, module: str, line: str, broken: str):
    shutil.copytree(ROOT / "pytest_tokaudit", tmp_path / "pytest_tokaudit",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "pytest_tokaudit" / module
    target.write_text(target.read_text() + "\n\n" + line)
    result = lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert broken in result.stdout.replace("\n", " "), result.stdout


def test_no_test_module_imports_another():
    """Shared helpers live in helper modules (conftest.py, audits.py, ...), never in a test
    module: importing one runs its module-level code and ties two subjects together."""
    import ast

    tests = ROOT / "tests"
    found = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.relative_to(tests)}:{node.lineno}: {name}" for name in names
                      if name.rsplit(".", 1)[-1].startswith("test_")]
    assert found == []
