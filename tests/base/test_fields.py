"""The grammar of count formulas and templates (base/fields.py): what reads, what is refused."""

from __future__ import annotations

import pytest

from pytest_tokaudit.base.fields import (
    CountSum,
    FieldError,
    Placeholder,
    Term,
    closest_paths,
    parse_count_formula,
    parse_template,
    paths_of,
    unescape,
)

U, R = ("usage", "completion_tokens"), ("usage", "completion_tokens_details", "reasoning_tokens")


@pytest.mark.parametrize(("text", "parsed", "shown"), [
    ("usage.completion_tokens", U, None),
    ("  usage.completion_tokens ", U, None),
    ("completion-tokens", ("completion-tokens",), None),  # a hyphen inside a name is the name's
    ("usage.completion_tokens - usage.completion_tokens_details.reasoning_tokens",
     CountSum((Term(U), Term(R, negative=True))), None),
    ("usage.completion_tokens -usage.completion_tokens_details.reasoning_tokens?",
     CountSum((Term(U), Term(R, True, True))),
     "usage.completion_tokens - usage.completion_tokens_details.reasoning_tokens?"),
    ("usage.completion_tokens+usage.completion_tokens_details.reasoning_tokens?",
     CountSum((Term(U), Term(R, True))),
     "usage.completion_tokens + usage.completion_tokens_details.reasoning_tokens?"),
    ("completion_tokens - 1", CountSum((Term(("completion_tokens",)),), -1), None),
    ("completion_tokens + 3 - 1", CountSum((Term(("completion_tokens",)),), 2), "completion_tokens + 2"),
    ("a + b? - c - 2", CountSum((Term(("a",)), Term(("b",), True), Term(("c",), negative=True)), -2), None),
    ("2 + a", CountSum((Term(("a",)),), 2), "a + 2"),
    ("a - 0", ("a",), None),  # nothing subtracted: the plain field
])
def test_count_formulas_read(text, parsed, shown):
    formula = parse_count_formula(text)
    assert formula == parsed
    if isinstance(formula, CountSum):
        assert str(formula) == (shown or text.strip())
        assert parse_count_formula(str(formula)) == formula  # what reports write reads back


@pytest.mark.parametrize(("text", "why"), [
    ("", "expected a field like"),
    ("usage.completion_tokens * 2", "'*' is not + or -"),
    ("(a + b)", "'(' is not + or -"),
    ("a / b", "'/' is not + or -"),
    ("usage completion_tokens", "white space inside a field name"),
    ("a? b", "white space inside a field name"),
    ("a?b", "`?` only ends a field"),
    ("a +", "an operator without an operand"),
    ("a + + b", "an operator without an operand"),
    ("a - - 1", "an operator without an operand"),
    ("- a", "starts with '-'"),
    ("+ a", "starts with '+'"),
    ("10 - a", "write the fields first"),
    ("5", "names no field"),
    ("3 + 4", "names no field"),
    ("a?", "a lone field cannot be optional"),
    ("a? - 1", "a lone field cannot be optional"),
    ("a? + b?", "at least one addend must be required"),
    ("a. + b", "expected a field name like"),
    ("a..b - c", "expected a field name like"),
])
def test_what_the_count_grammar_cannot_read_is_an_error(text, why):
    with pytest.raises(FieldError) as info:
        parse_count_formula(text)
    assert why in str(info.value)


@pytest.mark.parametrize(("text", "value"), [
    (r"a\nb", "a\nb"),
    (r"a\tb", "a\tb"),
    (r"a\\b", "a\\b"),
    (r"a\\nb", "a\\nb"),  # an escaped backslash, then n
    (r"\n\n", "\n\n"),
    ("no escapes", "no escapes"),
    ("a\nb", "a\nb"),  # a real newline (TOML's "\n") stays one
])
def test_template_escapes_read_as_python_reads_them(text, value):
    assert unescape(text) == value
    assert value == eval(repr(value))  # noqa: S307 - the same string Python would read


@pytest.mark.parametrize(("text", "why"), [
    (r"{a}\q", r"unknown escape '\\q' at character 4"),
    (r"{a}\{", r"unknown escape '\\{' at character 4"),
    (r"{a}\u00e9", r"unknown escape '\\u' at character 4"),
    (r"{a}\r", r"unknown escape '\\r'"),
    ("{a}\\", "a lone backslash at the end at character 4"),
])
def test_other_backslash_sequences_are_errors(text, why):
    with pytest.raises(FieldError) as info:
        parse_template(text)
    assert why in str(info.value)


def test_a_template_with_newlines_keeps_its_text_as_written():
    written = r"<think>\n{choices.0.message.reasoning?}\n</think>\n\n{choices.0.message.content}<|im_end|>"
    t = parse_template(written)
    assert t.parts == ("<think>\n", Placeholder(("choices", "0", "message", "reasoning"), True),
                       "\n</think>\n\n", Placeholder(("choices", "0", "message", "content")), "<|im_end|>")
    assert str(t) == written and parse_template(str(t)) == t
    assert parse_template(r"{{\n}}{a}").parts == ("{\n}", Placeholder(("a",)))


def test_paths_of_a_record_and_the_closest_to_a_typo():
    record = {"id": "gen-1", "usage": {"completion_tokens": 3, "prompt_tokens": 9,
                                       "completion_tokens_details": {"reasoning_tokens": 1}},
              "choices": [{"message": {"content": "x", "reasoning": "y"}, "finish_reason": "stop"},
                          {"message": {"content": "z"}}]}
    seen = paths_of(record)
    assert seen[:3] == ["id", "usage", "choices"]  # shallow first
    assert "choices.0.message.content" in seen and "choices.1" not in seen
    assert "usage.completion_tokens_details.reasoning_tokens" in seen
    assert closest_paths("usage.completion_tokns", seen)[0] == "usage.completion_tokens"
    assert closest_paths("choices.0.message.contnet", seen)[0] == "choices.0.message.content"
    assert closest_paths("usage.completion_tokens_details.reasoning", seen)[0] == \
        "usage.completion_tokens_details.reasoning_tokens"
    assert closest_paths("nothing_like_it", seen) == []
    assert len(paths_of({f"k{i}": {"a": 1} for i in range(500)}, limit=50)) == 50
