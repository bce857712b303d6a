"""What a pytest run pays for the plugin before any audit: pytest imports the entry and asks
every output for its options on every run, with or without --tokaudit (issue #32's start-up).
The audit's own modules load only when it runs; the Arrow pass only for Parquet/Arrow."""

import subprocess
import sys

AUDIT = ("pytest_tokaudit.api", "pytest_tokaudit.run.cache", "pytest_tokaudit.run.config",
         "pytest_tokaudit.engine.passes", "pytest_tokaudit.engine.columnar",
         "pytest_tokaudit.engine.arrow", "pytest_tokaudit.sources.parse",
         "pytest_tokaudit.checks.join", "pyarrow", "numpy", "simdjson", "transformers")


def loaded(code: str, names: tuple[str, ...]) -> list[str]:
    code += f"; import sys; print(sorted(m for m in {names!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return eval(out.stdout.strip())


def test_declaring_the_options_imports_no_audit_module():
    code = "import pytest_tokaudit.plugin, pytest_tokaudit.outputs as o; o.modules()"
    assert loaded(code, AUDIT) == []


def test_a_jsonl_audit_does_not_import_the_arrow_pass():
    assert loaded("import pytest_tokaudit.api", ("pytest_tokaudit.engine.arrow", "pyarrow")) == []
