"""Configuration: typed ini keys (pytest.ini, both pyproject.toml tables), ranges, an error
naming its key for every bad value, the tokenizer path, and Contract.replace.

Most tests read the contract in process (pytester.parseconfigure: the plugin's own
pytest_configure, no audit); the runs that show what a user sees go through pytest.
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
from pathlib import Path

import pytest

from conftest import TokProject, assert_no_crash, rec
from pytest_tokaudit import api, hookspecs
from pytest_tokaudit.run.config import CONTRACT
from pytest_tokaudit.model.contract import KEYS, Allowance, Contract, ContractError, readme_table
from tokdata import qwen_dir

USAGE = pytest.ExitCode.USAGE_ERROR
PYTEST = tuple(pytest.version_tuple[:2])
DEFAULT = Contract(**{k.attr: k.parse(k.default) for k in KEYS})


def contract_for(pytester: pytest.Pytester, *args: str) -> Contract:
    """The contract the plugin resolves in pytest_configure for the files in pytester.path."""
    config = pytester.parseconfigure("--tokaudit", "-p", "no:xdist", *args)
    return config.stash[CONTRACT]


def usage_error(pytester: pytest.Pytester, *args: str) -> str:
    with pytest.raises(pytest.UsageError) as info:
        pytester.parseconfigure("--tokaudit", "-p", "no:xdist", *args)
    return str(info.value)


def write_ini(pytester: pytest.Pytester, **keys: str) -> None:
    lines = ["[pytest]", *(f"{k} = {v}".rstrip() for k, v in keys.items())]
    (pytester.path / "pytest.ini").write_text("\n".join(lines) + "\n", encoding="utf-8")


# -- A. typed keys: pytest.ini, [tool.pytest.ini_options], [tool.pytest] --------------------------

AS_INI = """
[pytest]
tokaudit_glob = *.jsonl "my data/*.jsonl"
tokaudit_ids_field = response.ids
tokaudit_where = provider
tokaudit_require_once = 151668
tokaudit_require_last = 151645 7
tokaudit_forbid = 151667
tokaudit_allow_empty = true
tokaudit_unique_ids = yes
tokaudit_count_abs = 12
tokaudit_count_rel = 3%
tokaudit_count_outliers = 3
tokaudit_count_mean_rel = 1%
tokaudit_max_shown = 50
tokaudit_shard_size = 0
tokaudit_budget = 1000000
tokaudit_price_per_mtok = 2.5
tokaudit_baseline_rel = 20%
"""

# pytest 8 and 9 hand [tool.pytest.ini_options] over as ini text: scalars become strings,
# lists stay lists (of whatever TOML held, ints included).
AS_INI_OPTIONS = """
[tool.pytest.ini_options]
tokaudit_glob = ["*.jsonl", "my data/*.jsonl"]
tokaudit_ids_field = "response.ids"
tokaudit_where = "provider"
tokaudit_require_once = [151668]
tokaudit_require_last = ["151645", 7]
tokaudit_forbid = "151667"
tokaudit_allow_empty = true
tokaudit_unique_ids = true
tokaudit_count_abs = 12
tokaudit_count_rel = 0.03
tokaudit_count_outliers = 3
tokaudit_count_mean_rel = "1%"
tokaudit_max_shown = 50
tokaudit_shard_size = 0
tokaudit_budget = 1000000
tokaudit_price_per_mtok = 2.5
tokaudit_baseline_rel = 0.2
"""

# pytest 9's native table keeps TOML types and checks them against the registered ini type.
# Before pytest 9.2 (no union types) a key that also takes text (2%, empty) is a string there.
NUMBERS_NATIVE = PYTEST >= (9, 2)
AS_NATIVE = f"""
[tool.pytest]
tokaudit_glob = ["*.jsonl", "my data/*.jsonl"]
tokaudit_ids_field = "response.ids"
tokaudit_where = "provider"
tokaudit_require_once = ["151668"]
tokaudit_require_last = ["151645", "7"]
tokaudit_forbid = ["151667"]
tokaudit_allow_empty = true
tokaudit_unique_ids = true
tokaudit_count_abs = 12
tokaudit_count_rel = {'0.03' if NUMBERS_NATIVE else '"3%"'}
tokaudit_count_outliers = {'3' if NUMBERS_NATIVE else '"3"'}
tokaudit_count_mean_rel = "1%"
tokaudit_max_shown = 50
tokaudit_shard_size = 0
tokaudit_budget = {'1000000' if NUMBERS_NATIVE else '"1000000"'}
tokaudit_price_per_mtok = {'2.5' if NUMBERS_NATIVE else '"2.5"'}
tokaudit_baseline_rel = {'0.2' if NUMBERS_NATIVE else '"20%"'}
"""

def _contract_from(pytester: pytest.Pytester, name: str, text: str) -> Contract:
    (pytester.path / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return contract_for(pytester)


@pytest.mark.parametrize("form", [
    "ini_options",
    pytest.param("native", marks=pytest.mark.skipif(PYTEST < (9, 0), reason="[tool.pytest] came in pytest 9")),
])
def test_toml_tables_give_the_contract_pytest_ini_gives(pytester: pytest.Pytester, form: str):
    expected = _contract_from(pytester, "pytest.ini", AS_INI)
    (pytester.path / "pytest.ini").unlink()
    contract = _contract_from(pytester, "pyproject.toml", AS_INI_OPTIONS if form == "ini_options" else AS_NATIVE)
    assert contract == expected
    assert contract.glob == ("*.jsonl", "my data/*.jsonl")
    assert contract.ids_field == ("response", "ids")
    assert (contract.require_once_ids, contract.require_last_ids, contract.forbid_ids) == (
        (151668,), (151645, 7), (151667,))
    assert (contract.allow_empty, contract.unique_ids) == (True, True)
    assert (contract.count_abs, contract.count_rel, contract.count_outliers) == (
        12, pytest.approx(0.03), Allowance(3, relative=False))
    assert (contract.max_shown, contract.shard_size, contract.budget) == (50, 0, 1000000)
    assert (contract.price_per_mtok, contract.baseline_rel) == (2.5, pytest.approx(0.2))
    # Failure messages quote values as an ini file would: a list reads as words.
    assert contract.describe(("glob", "require_last", "allow_empty")) == (
        "pyproject.toml [tokaudit_glob = *.jsonl 'my data/*.jsonl', tokaudit_require_last = "
        "151645 7, tokaudit_allow_empty = true]"
    )


def test_ini_options_lists_and_bools_audit_end_to_end(project: TokProject):
    """[tool.pytest.ini_options] with a list of token ids was an INTERNALERROR."""
    project.write("pyproject.toml", textwrap.dedent("""
        [tool.pytest.ini_options]
        tokaudit_require_once = [151668]
        tokaudit_require_last = ["151645"]
        tokaudit_allow_empty = true
        tokaudit_count_abs = 8
    """))
    project.jsonl("data/a.jsonl", [rec(1, 10, once=[151668], last=151645), rec(2, 10, last=151645)])
    project.jsonl("data/empty.jsonl", [])
    result = project.run("-rA")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "data/a.jsonl:2: sample_id=2: require_once: expected 151668 once, found 0 times",
        "PASSED data/empty.jsonl::tokaudit",
    ])


@pytest.mark.skipif(PYTEST < (9, 0), reason="[tool.pytest] came in pytest 9")
def test_native_toml_table_takes_bools_and_ints(project: TokProject):
    """pytest 9's [tool.pytest] with a bool or an int was refused (or an INTERNALERROR)."""
    project.write("pyproject.toml", textwrap.dedent("""
        [tool.pytest]
        tokaudit_allow_empty = true
        tokaudit_unique_ids = true
        tokaudit_count_abs = 16
        tokaudit_max_shown = 5
        tokaudit_require_last = ["151645"]
        tokaudit_count_mean_rel = ""
    """))
    project.jsonl("data/a.jsonl", [rec(1, 100, 112, last=151645)])  # 12 off: inside 16
    project.jsonl("data/empty.jsonl", [])
    result = project.run("-rA")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["PASSED data/a.jsonl::tokaudit", "PASSED pyproject.toml::tokaudit::unique_ids*"])


@pytest.mark.parametrize(("table", "line", "message"), [
    pytest.param("tool.pytest.ini_options", "tokaudit_require_last = [true]",
                 "tokaudit_require_last (pyproject.toml): expected a list of non-empty strings, "
                 "got True in [True]", id="ini_options-bool-in-token-list"),
    pytest.param("tool.pytest.ini_options", "tokaudit_glob = []",
                 "tokaudit_glob (pyproject.toml): expected at least one file name pattern, like "
                 "*.jsonl", id="ini_options-no-pattern"),
    pytest.param("tool.pytest.ini_options", "tokaudit_count_abs = [8]",
                 "tokaudit_count_abs (pyproject.toml): *", id="ini_options-list-for-a-count"),
    pytest.param("tool.pytest.ini_options", "tokaudit_count_rel = 1e3",
                 "tokaudit_count_rel (pyproject.toml): '1000.0' is out of range: at most 10000%",
                 id="ini_options-huge-float"),
    pytest.param("tool.pytest", 'tokaudit_allow_empty = "maybe"',
                 "tokaudit_allow_empty (pyproject.toml): *", id="native-string-for-a-bool"),
    pytest.param("tool.pytest", "tokaudit_count_abs = 8.5",
                 "tokaudit_count_abs (pyproject.toml): *", id="native-float-for-a-count"),
    pytest.param("tool.pytest", "tokaudit_max_shown = -1",
                 "tokaudit_max_shown (pyproject.toml): expected a non-negative whole number, "
                 "got -1", id="native-negative"),
    pytest.param("tool.pytest", "tokaudit_count_rel = nan",
                 "tokaudit_count_rel (pyproject.toml): *", id="native-nan"),
    pytest.param("tool.pytest", "tokaudit_require_once = [151668]",
                 "tokaudit_require_once (pyproject.toml): *", id="native-int-in-token-list"),
])
def test_toml_values_of_the_wrong_type_are_usage_errors_naming_the_key(
    pytester: pytest.Pytester, table: str, line: str, message: str
):
    if table == "tool.pytest" and PYTEST < (9, 0):
        pytest.skip("[tool.pytest] came in pytest 9")
    (pytester.path / "pyproject.toml").write_text(f"[{table}]\n{line}\n")
    assert re.fullmatch(re.escape(message).replace(r"\*", ".*"), usage_error(pytester))


@pytest.mark.parametrize("key", ["tokaudit_count_abs", "tokaudit_progress_interval"])
def test_a_toml_list_for_a_number_is_one_usage_error_and_no_warning(pytester: pytest.Pytester, key):
    """pytest 9.2 warns (PytestRemovedIn10Warning) before handing a list to a key read as
    text; the plugin refuses the value itself, naming the key, so the warning says nothing
    more (and pytest 10's TypeError is the same usage error)."""
    (pytester.path / "pyproject.toml").write_text(f"[tool.pytest.ini_options]\n{key} = [8]\n")
    # (The configure step applies -W to what it warns, as a run does.)
    message = usage_error(pytester, "-W", "error::pytest.PytestDeprecationWarning")
    assert message.startswith(key), message


# -- B, C. every bad value is a usage error naming its key ---------------------------------------

BAD = {
    "empty": "",
    "superscript-digit": "²",
    "arabic-indic-digit": "٣",
    "negative": "-1",
    "huge": "18446744073709551616",
    "nan": "nan",
    "inf": "inf",
    "exponent": "1e3",
    "double-percent": "2%%",
    "word": "abc",
}
NUMBERS = ("tokaudit_count_abs", "tokaudit_count_rel", "tokaudit_count_outliers",
           "tokaudit_max_shown", "tokaudit_shard_size", "tokaudit_baseline_rel",
           "tokaudit_max_line_bytes", "tokaudit_prompt_count_abs", "tokaudit_prompt_count_rel",
           "tokaudit_prompt_count_outliers")
OPTIONAL_NUMBERS = ("tokaudit_count_mean_rel", "tokaudit_count_mean_abs", "tokaudit_roundtrip_rel", "tokaudit_budget",
                    "tokaudit_price_per_mtok", "tokaudit_count_outlier_max",
                    "tokaudit_prompt_count_mean_rel", "tokaudit_prompt_count_mean_abs",
                    "tokaudit_price_input_per_mtok", "tokaudit_price_cached_input_per_mtok",
                    "tokaudit_price_output_per_mtok", "tokaudit_budget_money")  # empty: off / unset
BOOLS = ("tokaudit_allow_empty", "tokaudit_trust_remote_code", "tokaudit_unique_ids",
         "tokaudit_unique_text")
TOKENS = ("tokaudit_require_once", "tokaudit_require_last", "tokaudit_forbid")  # names need a tokenizer
PATHS = ("tokaudit_tokenizer", "tokaudit_expected_ids", "tokaudit_chat_template",
         "tokaudit_requests", "tokaudit_prices")  # none of these exists
OTHER = {
    "tokaudit_glob": {"empty": "", "unclosed-quote": "'*.jsonl"},
    "tokaudit_ids_field": {"empty": "", "empty-part": "response..ids", "dot": "."},
    "tokaudit_count_field": {"empty": "", "trailing-dot": "usage.", "empty-addend": "a + ",
                             "lone-optional": "usage.x?", "all-optional": "a? + b?",
                             "times": "usage.completion_tokens * 2", "brackets": "(a + b) - c",
                             "leading-minus": "- a", "number-only": "12", "two-minus": "a - - b",
                             "space-in-name": "usage completion_tokens"},
    "tokaudit_text_template": {"unclosed": "{choices.0.message.content", "stray-close": "a}{b}",
                               "no-field": "<|im_end|>", "empty-part": "{a..b}",
                               "unknown-escape": r"{a}\r", "escaped-brace": r"\{{a}",
                               "lone-backslash": "{a}\\"},
    "tokaudit_finish_reason_field": {"empty-part": "choices..finish_reason"},
    "tokaudit_finish_reason": {"unclosed-quote": "'stop"},
    "tokaudit_group_by": {"unclosed-quote": "'provider", "empty-part": "provider meta..model"},
    "tokaudit_id_field": {"empty-part": "meta..id", "leading-dot": ".id"},
    "tokaudit_where": {"empty-part": "a..b"},
    "tokaudit_cache_dir": {"a-file": "pytest.ini"},
    "tokaudit_cache_inputs": {"bad-variable": "$1LIMIT", "lone-dollar": "$", "unclosed-quote": "'a"},
    "tokaudit_engine": {"unknown": "dask", "empty": ""},
    "tokaudit_prompt_messages": {"empty-part": "request..messages"},
    "tokaudit_prompt_tools": {"empty-part": "request..tools"},
    "tokaudit_prompt_count_field": {"empty": "", "times": "usage.prompt_tokens * 2"},
    "tokaudit_join_field": {"empty": "", "empty-part": "a..b"},
    "tokaudit_cached_tokens_field": {"empty-part": "usage..cached_tokens"},
}


# pytest 9.0 and 9.1 read these with their own "int" type (so that [tool.pytest] takes an
# integer): int() reads the text before the plugin does, so '٣' is 3, and a bad text's
# message is int()'s, after the key.
PYTEST_INT = (("tokaudit_count_abs", "tokaudit_max_shown", "tokaudit_shard_size",
               "tokaudit_max_line_bytes", "tokaudit_prompt_count_abs")
              if (9, 0) <= PYTEST < (9, 2) else ())


def _cases():
    for key in (*NUMBERS, *OPTIONAL_NUMBERS, *BOOLS, *TOKENS, *PATHS):
        for what, value in BAD.items():
            if value == "" and key in (*OPTIONAL_NUMBERS, *TOKENS, *PATHS):
                continue
            if value == "٣" and key in PYTEST_INT:
                continue
            yield pytest.param(key, value, id=f"{key}-{what}")
    for key, values in OTHER.items():
        for what, value in values.items():
            yield pytest.param(key, value, id=f"{key}-{what}")


def test_the_docs_table_is_made_from_the_keys():
    page = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    assert readme_table() in page, "run: python -c 'from pytest_tokaudit.model.contract import " \
        "readme_table; print(readme_table())' and paste it into docs/configuration.md"


def test_the_bad_value_cases_cover_every_key():
    covered = {p.values[0] for p in _cases()}
    assert covered == {k.name for k in KEYS}


def _bad_ini(folder: Path, key: str, value: str) -> Path:
    more = {}
    if key == "tokaudit_roundtrip_rel":  # else the missing tokenizer would be the only error
        more["tokaudit_tokenizer"] = str(qwen_dir())
    lines = ["[pytest]", *(f"{k} = {v}".rstrip() for k, v in {key: value, **more}.items())]
    (folder / "pytest.ini").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder / "pytest.ini"


def _api_message(ini: Path) -> str:
    with pytest.raises(api.ContractError) as info:
        api.Contract.from_ini(ini)
    return str(info.value)


@pytest.mark.parametrize(("key", "value"), list(_cases()))
def test_every_bad_value_is_a_contract_error_naming_its_key(tmp_path: Path, key, value):
    """Through the public API (the validation the plugin runs: compared below)."""
    message = _api_message(_bad_ini(tmp_path, key, value))
    assert re.match(rf"{key}( \(pytest\.ini\))?: ", message), message
    assert "invalid literal" not in message


def _through_pytest():
    """The cases whose reading in pytest can differ from the API's: one per key, and every
    one that pytest's own typed reading sees first (word lists, pytest's int keys)."""
    seen = set()
    for case in _cases():
        key, value = case.values
        kind = next(k.kind for k in KEYS if k.name == key)
        if key not in seen or kind == "args" or key in PYTEST_INT:
            seen.add(key)
            yield case


@pytest.mark.parametrize(("key", "value"), list(_through_pytest()))
def test_every_bad_value_is_a_usage_error_naming_its_key(pytester: pytest.Pytester, key, value):
    """The plugin's usage error is the API's ContractError, word for word."""
    _bad_ini(pytester.path, key, value)
    message = usage_error(pytester)
    assert re.match(rf"{key}( \(pytest\.ini\))?: ", message), message
    if key in PYTEST_INT:  # pytest 9.0-9.1 reads these as ints itself, in its own words
        return
    assert "invalid literal" not in message
    assert message == _api_message(pytester.path / "pytest.ini")


def test_a_unicode_digit_token_names_its_key(pytester: pytest.Pytester):
    """'²'.isdigit() is True: it used to reach int() and fail without the key."""
    write_ini(pytester, tokaudit_require_once="²")
    assert usage_error(pytester) == (
        "tokaudit_require_once: token names ['²'] need a tokenizer; set tokaudit_tokenizer to "
        "a local tokenizer directory, or write token ids"
    )


def test_out_of_range_is_a_usage_error_at_start_not_a_failure_per_file(pytester: pytest.Pytester):
    """max_shown = 2**64 was accepted, then every file failed with 'Integer exceeds 64-bit range'."""
    write_ini(pytester, tokaudit_max_shown="18446744073709551616")
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.jsonl("data/a.jsonl", [rec(1)])
    result = project.run()
    assert result.ret == USAGE
    result.stderr.fnmatch_lines([
        "ERROR: tokaudit_max_shown (pytest.ini): 18446744073709551616 is out of range: at most 1,000,000"
    ])
    assert_no_crash(result)
    result.stdout.no_fnmatch_line("*tokaudit summary*")


@pytest.mark.parametrize(("key", "highest"), [
    ("tokaudit_max_shown", 10**6),
    ("tokaudit_count_abs", 2**63 - 1),
    ("tokaudit_shard_size", 2**63 - 1),
    ("tokaudit_budget", 2**63 - 1),
    ("tokaudit_count_outliers", 2**63 - 1),
    ("tokaudit_forbid", 2**32 - 1),  # a token id
])
def test_ranges_end_where_they_say(pytester: pytest.Pytester, key: str, highest: int):
    write_ini(pytester, **{key: str(highest)})
    contract_for(pytester)
    write_ini(pytester, **{key: str(highest + 1)})
    assert re.match(rf"{key} \(pytest.ini\): .*{highest + 1}.* out of range: at most "
                    rf"{highest:,}$", usage_error(pytester))


@pytest.mark.parametrize(("key", "value", "message"), [
    ("tokaudit_count_rel", "lots", "expected a number like 0.02 or 2%, got 'lots'"),
    ("tokaudit_count_rel", "10001%", "'10001%' is out of range: at most 10000%"),
    ("tokaudit_count_outliers", "101%", "'101%' is out of range: at most 100%"),
    ("tokaudit_count_outliers", "0.5", "expected a count like 3 or a share like 0.5%, got '0.5'"),
    ("tokaudit_allow_empty", "maybe", "*"),
    ("tokaudit_price_per_mtok", "$2", "expected a price like 0.60, got '$2'"),
])
def test_messages_say_what_to_write(pytester: pytest.Pytester, key, value, message):
    write_ini(pytester, **{key: value})
    got = usage_error(pytester)
    assert got.startswith(f"{key} (pytest.ini): ")
    assert message == "*" or got == f"{key} (pytest.ini): {message}"


@pytest.mark.parametrize(("key", "value", "message"), [
    ("tokaudit_count_field", "usage.completion_tokens - usage.completion_tokens_details * 2",
     "cannot read 'usage.completion_tokens_details * 2' in 'usage.completion_tokens - "
     "usage.completion_tokens_details * 2' ('*' is not + or -): expected a field like "
     "usage.completion_tokens, or fields and whole numbers joined by + and -, like "
     "usage.completion_tokens - usage.completion_tokens_details.reasoning_tokens (`?`: an "
     "addend that may be missing or null counts 0)"),
    ("tokaudit_text_template", r"{choices.0.message.content}\r\n",
     r"unknown escape '\\r' at character 28 of '{choices.0.message.content}\\r\\n': a template "
     r"reads \n (newline), \t (tab) and \\ (a backslash)"),
])
def test_formula_and_template_errors_say_what_to_write(pytester: pytest.Pytester, key, value, message):
    write_ini(pytester, **{key: value}, tokaudit_tokenizer=str(qwen_dir()))
    assert usage_error(pytester) == f"{key} (pytest.ini): {message}"


def test_a_count_formula_subtracts_and_adds_whole_numbers(pytester: pytest.Pytester):
    formula = "usage.completion_tokens - usage.completion_tokens_details.reasoning_tokens"
    write_ini(pytester, tokaudit_count_field=formula)
    contract = contract_for(pytester)
    assert str(contract.count_field) == formula
    assert contract.to_json()["tokaudit_count_field"] == formula
    assert str(contract_for(pytester, "-o", "tokaudit_count_field=completion_tokens - 1").count_field) \
        == "completion_tokens - 1"


def test_template_escapes_are_read_from_every_kind_of_ini_file(pytester: pytest.Pytester):
    """`\\n` in pytest.ini, in a TOML literal string and (TOML's own) in a basic string: one
    newline each; TOML's `\\\\n` is the two characters backslash n, which read as one too."""
    want = ("{a}", "\n</think>\n\n", "{b}")
    write_ini(pytester, tokaudit_text_template=r"{a}\n</think>\n\n{b}", tokaudit_tokenizer=str(qwen_dir()))
    forms = [contract_for(pytester)]
    (pytester.path / "pytest.ini").unlink()
    for line in (r"tokaudit_text_template = '{a}\n</think>\n\n{b}'",
                 r'tokaudit_text_template = "{a}\n</think>\n\n{b}"',
                 r'tokaudit_text_template = "{a}\\n</think>\\n\\n{b}"'):
        (pytester.path / "pyproject.toml").write_text(
            f"[tool.pytest.ini_options]\ntokaudit_tokenizer = '{qwen_dir()}'\n{line}\n")
        forms.append(contract_for(pytester))
    for contract in forms:
        parts = contract.text_template.parts
        assert (str(parts[0].name) if not isinstance(parts[0], str) else parts[0]) == "a"
        assert parts[1] == want[1], parts


@pytest.mark.parametrize(("where", "text", "message"), [
    ("pytest.ini", "[pytest]\ntokaudit_count_feild = usage.completion_tokens\n",
     "tokaudit_count_feild (pytest.ini): not a key of pytest-tokaudit; did you mean tokaudit_count_field?"),
    ("pyproject.toml", "[tool.pytest.ini_options]\ntokaudit_max_show = 5\n",
     "tokaudit_max_show (pyproject.toml): not a key of pytest-tokaudit; did you mean tokaudit_max_shown?"),
    ("tox.ini", "[pytest]\ntokaudit_progres_interval = 5\n",
     "tokaudit_progres_interval (tox.ini): not a key of pytest-tokaudit; did you mean "
     "tokaudit_progress_interval?"),
    ("pytest.ini", "[pytest]\ntokaudit_frobnicate = 1\n",
     "tokaudit_frobnicate (pytest.ini): not a key of pytest-tokaudit; the keys are listed in the "
     "README's Configuration reference"),
])
def test_an_unknown_key_is_a_usage_error_naming_the_closest(pytester: pytest.Pytester, where, text, message):
    (pytester.path / where).write_text(text)
    assert usage_error(pytester) == message
    # Without --tokaudit too: the key would be ignored silently in the run that turns it on.
    with pytest.raises(pytest.UsageError, match=re.escape(message)):
        pytester.parseconfigure("-p", "no:xdist")


def test_an_unknown_key_on_the_command_line_names_its_origin(project: TokProject):
    project.ini(tokaudit_progress_interval=5, tokaudit="true", tokaudit_count_mean_rel="1%")
    project.jsonl("data/a.jsonl", [rec(1)])
    assert project.run().ret == pytest.ExitCode.OK  # the switch and the progress key are known
    result = project.run("-o", "tokaudit_count_mean_rell=2%")
    assert result.ret == USAGE
    result.stderr.fnmatch_lines(["ERROR: tokaudit_count_mean_rell (-o): not a key of "
                                 "pytest-tokaudit; did you mean tokaudit_count_mean_rel?"])
    assert "Unknown config option" not in result.stdout.str() + result.stderr.str()
    assert_no_crash(result)
    assert project.run("-o", "tokaudit_count_mean_rell=2%", "--help").ret == pytest.ExitCode.OK


def test_the_command_line_names_its_origin(pytester: pytest.Pytester):
    write_ini(pytester)
    assert usage_error(pytester, "-o", "tokaudit_budget=-5") == (
        "tokaudit_budget (-o): expected a non-negative whole number, got '-5'")
    assert contract_for(pytester, "-o", "tokaudit_budget=").budget is None  # empty: unset


# -- D. a tokenizer directory that is not there ----------------------------------------------------

def test_a_missing_tokenizer_directory_is_a_usage_error_even_when_unused(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini(tokaudit_tokenizer="abc")  # no check needs it: ids only, no round trip
    project.jsonl("data/a.jsonl", [rec(1)])
    result = project.run()
    assert result.ret == USAGE
    result.stderr.fnmatch_lines([
        f"ERROR: tokaudit_tokenizer (pytest.ini): tokenizer directory {pytester.path}/abc does "
        "not exist; give a local directory holding tokenizer.json / tokenizer_config.json"
    ])
    assert_no_crash(result)
    project.write("afile", "")
    assert usage_error(pytester, "--tokaudit-tokenizer=afile") == (
        f"tokaudit_tokenizer (--tokaudit-tokenizer): tokenizer directory {pytester.path}/afile "
        "is not a directory; give a local directory holding tokenizer.json / tokenizer_config.json"
    )


def test_a_missing_manifest_is_a_usage_error(pytester: pytest.Pytester):
    write_ini(pytester, tokaudit_expected_ids="manifest.txt")
    assert usage_error(pytester) == (
        f"tokaudit_expected_ids (pytest.ini): manifest {pytester.path}/manifest.txt does not exist")


def test_an_unused_tokenizer_is_not_loaded(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini(tokaudit_tokenizer=str(qwen_dir()), tokaudit_require_last="151645")
    project.jsonl("data/a.jsonl", [rec(1, last=151645)])
    project.write("conftest.py", (
        "import sys\n"
        "def pytest_sessionfinish():\n"
        "    assert 'transformers' not in sys.modules, 'transformers was imported'\n"
    ))
    result = project.run()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()


# -- E. Contract.replace validates like the ini file ---------------------------------------------

def test_replace_takes_the_ini_text_forms():
    c = DEFAULT.replace(count_rel="2%", count_abs="12", count_outliers="0.5%", where="meta.provider",
                        allow_empty="yes", budget="1000", require_once="151668 7")
    assert (c.count_rel, c.count_abs, c.count_outliers) == (0.02, 12, Allowance(0.005, relative=True))
    assert (c.where, c.allow_empty, c.budget) == (("meta", "provider"), True, 1000)
    assert c.require_once_ids == (151668, 7)
    assert c.describe(("count_rel", "count_abs", "allow_empty")) == (
        "pytest_tokaudit_contract [tokaudit_count_rel = 2%, tokaudit_count_abs = 12, "
        "tokaudit_allow_empty = true]"
    )
    # An int, a string or an Allowance for the outliers.
    assert DEFAULT.replace(count_outliers=5).count_outliers == Allowance(5, relative=False)
    assert DEFAULT.replace(count_outliers="5").count_outliers == Allowance(5, relative=False)
    assert DEFAULT.replace(count_outliers=Allowance(5, relative=False)).count_outliers.of(100) == 5


@pytest.mark.parametrize(("changes", "message"), [
    ({"count_abs": "lots"}, "tokaudit_count_abs: expected a whole number, got 'lots'"),
    ({"count_abs": -1}, "tokaudit_count_abs: expected a non-negative whole number, got -1"),
    ({"count_abs": 8.5}, "tokaudit_count_abs: expected a whole number, got 8.5"),
    ({"count_abs": True}, "tokaudit_count_abs: expected a whole number, got True"),
    ({"count_rel": "lots"}, "tokaudit_count_rel: expected a number like 0.02 or 2%, got 'lots'"),
    ({"count_rel": float("nan")}, "tokaudit_count_rel: expected a non-negative number, got nan"),
    ({"count_outliers": "many"}, "tokaudit_count_outliers: expected a count like 3 or a share like 0.5%, got 'many'"),
    ({"count_outliers": Allowance(2.0, relative=True)}, "tokaudit_count_outliers: 2.0 is out of range: at most 100%"),
    ({"max_shown": 10**7}, "tokaudit_max_shown: 10000000 is out of range: at most 1,000,000"),
    ({"allow_empty": "maybe"}, "tokaudit_allow_empty: expected true or false, got 'maybe'"),
    ({"ids_field": ""}, "tokaudit_ids_field: must not be empty: name the field, like completion_tokens"),
    ({"require_once": "²"}, "tokaudit_require_once: token names ['²'] need a tokenizer; *"),
    ({"roundtrip_rel": "5%"}, "tokaudit_roundtrip_rel needs a tokenizer: *"),
    ({"count_tolerance": 3}, "unknown contract value count_tolerance; known: glob, *"),
])
def test_replace_refuses_what_the_ini_refuses(changes, message):
    with pytest.raises(ContractError) as info:
        DEFAULT.replace(**changes)
    assert re.fullmatch(re.escape(message).replace(r"\*", ".*"), str(info.value))


def test_every_way_of_making_a_contract_validates():
    with pytest.raises(ContractError, match="^tokaudit_max_shown: "):
        dataclasses.replace(DEFAULT, max_shown=-1)
    with pytest.raises(ContractError, match="^tokaudit_count_rel: "):
        Contract(**{**{k.attr: k.parse(k.default) for k in KEYS}, "count_rel": "2 %%"})
    with pytest.raises(ContractError, match="^tokaudit_budget: "):
        Contract.from_json({"tokaudit_budget": "1e9"})
    assert dataclasses.replace(DEFAULT, count_rel="5%").count_rel == 0.05


def test_the_hookspec_example_runs(project: TokProject):
    """hookspecs.py's example (count_outliers=5, an int) failed where an Allowance was expected."""
    doc = hookspecs.pytest_tokaudit_contract.__doc__
    example = textwrap.dedent(doc.split("::", 1)[1])
    assert "count_outliers=5" in example
    project.write("data/conftest.py", example)
    project.ini(tokaudit_count_mean_rel="")
    # 5 records 20 tokens off: over count_abs=16 too, but retry_ files allow 5 outliers.
    off = [rec(i, 100, 120) for i in range(1, 6)]
    project.jsonl("data/retry_a.jsonl", off)
    project.jsonl("data/b.jsonl", off)
    result = project.run("-rA")
    assert_no_crash(result)
    result.stdout.fnmatch_lines(["PASSED data/retry_a.jsonl::tokaudit"])
    result.stdout.fnmatch_lines(["FAILED data/b.jsonl::tokaudit*"])


def test_a_bad_value_from_a_contract_hook_is_a_collection_error_naming_the_key(project: TokProject):
    project.write("data/conftest.py", (
        "def pytest_tokaudit_contract(path, contract):\n"
        "    return contract.replace(count_rel='lots')\n"
    ))
    project.jsonl("data/a.jsonl", [rec(1)])
    result = project.run()
    assert result.ret in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.TESTS_FAILED)
    result.stdout.fnmatch_lines([
        "*pytest_tokaudit_contract: tokaudit_count_rel: expected a number like 0.02 or 2%, got 'lots'*"
    ])
    assert "Traceback" not in result.stdout.str()
