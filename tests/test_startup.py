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


# What only some contracts use: a text template, the id index, the prompt audit, the kernel.
OPTIONAL = ("pytest_tokaudit.engine.template", "pytest_tokaudit.model.idindex",
            "pytest_tokaudit.tokenizers.chat", "pytest_tokaudit.engine.kernel")


def test_a_small_audit_imports_only_what_its_contract_uses(tmp_path):
    data = tmp_path / "a.jsonl"
    data.write_text('{"sample_id": 1, "completion_tokens": 1, "output_ids": [5]}\n')
    run = ("import pytest_tokaudit.plugin, pytest_tokaudit.run.controller; "
           "from pytest_tokaudit import api; c = api.Contract.from_dict({{{}}}); "
           f"api.audit_file(c, {str(data)!r}); api.judge_dataset(c, [])")
    assert loaded(run.format(""), OPTIONAL) == []
    wanted = '"tokaudit_unique_ids": "true"'
    assert loaded(run.format(wanted), OPTIONAL) == ["pytest_tokaudit.model.idindex"]
