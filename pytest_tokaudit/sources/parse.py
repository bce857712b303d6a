"""One JSON line -> a Record, SKIPPED, or Rejected with findings worded for the data."""

from __future__ import annotations

import functools
import json
import marshal
import re
from array import array
from typing import (
    Any,
    Iterable,
    final,
)

import orjson

from ..base.fields import MISSING, CountSum, count_paths, get_path, why_missing
from ..base.findings import Finding
from ..model import fastids
from ..model.contract import Contract
from ..model.records import SKIPPED, ErrorLine, Record, Rejected, TextRecord, Skipped, error_of

# orjson's integer range; a value outside it cannot be kept as an int in a report either.
U64_MAX = 2**64 - 1
_U64_ARRAY = array("Q").itemsize == 8  # array("Q", ids) then holds exactly 0..U64_MAX


# marshal (format 2) writes a list as `[` and its length, then each exact int of the int32
# range as the 5 bytes `i` + its value, little-endian, and anything else (a bool, a float,
# a larger int, a nested list) as another type code of another size, or refuses it (an
# int subclass). Checked once here; engine/dicts.py reads a batch's ids the same way.
MARSHAL_INT32 = marshal.dumps([1, -2], 2) == b"[\x02\x00\x00\x00i\x01\x00\x00\x00i\xfe\xff\xff\xff"
_LOW = bytes(range(128))  # the high byte of a non-negative int32


I64_MIN = -(2**63)


PREVIEW = 80  # characters of a value shown in a finding


@final  # so that `type(value) is _BigInt` tells int and _BigInt apart, to mypy too
class _BigInt:
    """An integer literal too long for int() (Python caps it at 4,300 digits)."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def __eq__(self, other: Any) -> bool:
        return type(other) is _BigInt and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


class _Invalid(Exception):
    """A line that is not valid JSON after all; the message is the finding's."""


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return "int" if type(value) is _BigInt else type(value).__name__


def _is_int(value: Any) -> bool:
    return type(value) is int or type(value) is _BigInt


def _cut(text: str, total: int, unit: str) -> str:
    if len(text) <= PREVIEW:
        return text
    return f"{text[:PREVIEW]}... ({total:,} {unit})"


def _number(value: int | _BigInt) -> str:
    """An integer's digits as in the line, cut to a preview."""
    if type(value) is _BigInt:
        text = value.text
    else:
        try:
            text = str(value)
        except ValueError:  # over sys.get_int_max_str_digits()
            return f"<an integer of {value.bit_length():,} bits>"
    return _cut(text, len(text.lstrip("-")), "digits")


def preview(value: Any) -> str:
    """repr(value) cut to PREVIEW characters, with the full length: a finding must not
    carry a 5 MB string."""
    if _is_int(value):
        return _number(value)
    text = repr(value)
    return _cut(text, len(value) if type(value) is str else len(text), "chars")


def _found(value: Any) -> str:
    """A value as the data spells it, and its type: 'null', 'true (bool)', "'7' (str)"."""
    if value is None:
        return "null"
    if type(value) is bool:
        return f"{str(value).lower()} (bool)"
    return f"{preview(value)} ({_type_name(value)})"


def _out_of_range(value: int | _BigInt) -> str | None:
    """' is out of range (...)' for an integer orjson cannot hold, else None."""
    if type(value) is _BigInt:
        side = "under -2**63" if value.text.startswith("-") else "over 2**64-1"
    elif value > U64_MAX:
        side = "over 2**64-1"
    elif value < I64_MIN:
        side = "under -2**63"
    else:
        return None
    return f" is out of range ({side})"


def _invalid_json(raw: bytes, exc: orjson.JSONDecodeError) -> str:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return _invalid_utf8(raw, err)
    if raw.startswith(b"\xef\xbb\xbf"):  # orjson words this differently by version
        return "invalid JSON: line starts with a UTF-8 byte order mark"
    return f"invalid JSON: {exc.msg} at column {exc.colno}"


def _invalid_utf8(raw: bytes, err: UnicodeDecodeError) -> str:
    return f"invalid UTF-8 at byte {err.start + 1}: {raw[err.start:err.start + 4]!r}"


def _exact_int(text: str) -> int | _BigInt:
    try:
        return int(text)
    except ValueError:  # over sys.get_int_max_str_digits()
        return _BigInt(text)


def _no_constant(name: str) -> Any:
    raise _Invalid(f"invalid JSON: {name} is not a JSON value")


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]").search


def _lone_surrogate(obj: Any) -> bool:
    """Whether a string (key or value) holds a lone UTF-16 surrogate."""
    stack = [obj]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return True
        elif kind is dict:
            stack.extend(item.keys())
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
    return False


def _load_exact(raw: bytes) -> Any:
    """The line as JSON with integers exact and out-of-range floats as +-inf (orjson turns
    integers past 64 bits into floats and rejects 1e400, both valid JSON). Only what orjson
    rejects besides is rejected: NaN/Infinity, lone surrogates. Raises _Invalid."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _Invalid(_invalid_utf8(raw, err)) from None
    try:
        obj = json.loads(text, parse_int=_exact_int, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise _Invalid(f"invalid JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise _Invalid("invalid JSON: nested too deeply") from None
    if _SURROGATE_ESCAPE(raw) and _lone_surrogate(obj):
        raise _Invalid("invalid JSON: a string holds a lone surrogate (\\ud800-\\udfff)")
    return obj


def load_object(raw: bytes) -> Any:
    """orjson's reading of the line; the stdlib's where orjson rejects a valid number."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if exc.msg.startswith("number is infinity"):  # 1e400: valid JSON, past a double
            return _load_exact(raw)
        raise _Invalid(_invalid_json(raw, exc)) from None


def check_ids(ids: Any, name: str) -> str | None:
    """Why `ids` is not a list of token ids (ints from 0 to 2**64-1), or None."""
    if type(ids) is not list:
        return f"{name} must be a list of token ids, found {_type_name(ids)}"
    if not ids:
        return None
    if MARSHAL_INT32:  # one pass in C, half the time of the two below: ids of 0..2**31-1
        n = len(ids)
        try:
            blob = marshal.dumps(ids, 2)
        except ValueError:  # an int subclass, an exact big int: below
            blob = b""
        if (len(blob) == 5 * n + 5 and blob[5::5] == b"i" * n
                and not blob[9::5].translate(None, _LOW)):  # every cell an `i`, none negative
            return None
    if set(map(type, ids)) == {int} and _U64_ARRAY:
        try:
            array("Q", ids)  # one pass in C: every id from 0 to 2**64-1 (min and max took two)
            return None
        except OverflowError:  # which one, and how: below
            pass
    for i, value in enumerate(ids):
        if not _is_int(value):
            return (f"{name}[{i}] must be an integer token id, "
                    f"found {_found(value)}")
        if type(value) is int and value < 0 or type(value) is _BigInt and value.text[0] == "-":
            return f"{name}[{i}] must be a non-negative token id, found {_number(value)}"
        if _out_of_range(value):
            return f"{name}[{i}] {_number(value)}{_out_of_range(value)}"
    return None  # unreachable: one of the branches above matched


def parse_line(
    raw: bytes, line: int, contract: Contract, fast: bool = True
) -> Record | Rejected | Skipped | ErrorLine:
    """One non-blank line -> Record, SKIPPED, Rejected (the findings that make it
    unusable, with the id and billed count if they could be read), or ErrorLine (an API's
    error line, with tokaudit_requests: counted apart, no finding)."""
    key = fast and fastids.key_for(contract.ids_field, contract.where, contract.id_field,
                                   *_read_paths(contract))
    cut = fastids.cut(raw, key) if key else None
    obj: Any = None
    if cut is not None:
        try:
            obj = orjson.loads(cut[0])
        except orjson.JSONDecodeError:
            cut = None
        else:
            if type(obj) is not dict or obj.get(contract.ids_field[0]) != fastids.SENTINEL:
                cut = None  # not a top-level key after all: the plain path decides
    if cut is None:
        try:
            obj = load_object(raw)
        except _Invalid as exc:
            return Rejected([Finding("json", str(exc), line)])
        found = parse_object(obj, line, contract)
        if type(found) is Rejected and type(obj) is dict and _big_floats(obj, contract):
            return _exactly(raw, line, contract)
        return found
    # The ids were cut out of `obj` (fastids): the rest as parse_object judges it.
    if contract.where:
        flag = get_path(obj, contract.where)
        if flag is MISSING or not flag:
            return SKIPPED
    if contract.requests and (why := error_of(obj)) is not None:  # counted apart
        return error_line(load_object(raw), contract, why)
    problems, record_id, count, _ = judge_fields(obj, contract, False)
    if problems and _big_floats(obj, contract):
        return _exactly(raw, line, contract)
    texts = None
    if contract.text_template is not None:
        texts = template_texts(obj, contract, problems)
    if problems:
        try:  # the whole object, for batch hooks
            obj = load_object(raw)
        except _Invalid:  # cannot be: the cut line parsed
            pass
        return rejected(obj, contract, problems, line, record_id, count)
    if texts is not None:
        return TextRecord(line, obj, record_id, count, None, cut[1], contract.ids_field[0],
                          texts=texts)
    return Record(line, obj, record_id, count, None, cut[1], contract.ids_field[0])


def _exactly(raw: bytes, line: int, contract: Contract) -> Record | Rejected | Skipped | ErrorLine:
    """A line whose fields failed with a float past 2**53: maybe an integer past 64 bits,
    which orjson reads as a float; judged again read exactly."""
    try:
        return parse_object(_load_exact(raw), line, contract)
    except _Invalid as exc:  # only nesting orjson allows and the stdlib does not
        return Rejected([Finding("json", str(exc), line)])


def parse_object(obj: Any, line: int, contract: Contract) -> Record | Rejected | Skipped | ErrorLine:
    """A record already parsed (the public API's dicts) -> Record, SKIPPED, or Rejected, as
    parse_line judges the same object read from a line."""
    if type(obj) is not dict:
        return Rejected([Finding("json", f"expected a JSON object, found {_type_name(obj)}", line)])
    if contract.where:
        flag = get_path(obj, contract.where)
        if flag is MISSING or not flag:
            return SKIPPED
    if contract.requests and (why := error_of(obj)) is not None:  # counted apart
        return error_line(obj, contract, why)
    problems, record_id, count, ids = judge_fields(obj, contract, True)
    texts = None
    if contract.text_template is not None:
        texts = template_texts(obj, contract, problems)
    if problems:
        return rejected(obj, contract, problems, line, record_id, count)
    if texts is not None:
        return TextRecord(line, obj, record_id, count, ids, texts=texts)
    return Record(line, obj, record_id, count, ids)


def error_line(obj: dict, contract: Contract, why: str) -> ErrorLine:
    """An OpenAI Batch error line (with tokaudit_requests; model.records.error_of says
    `why`): its id as written, and why. Every engine counts it apart through this."""
    record_id = get_path(obj, contract.id_field) if contract.id_field else None
    ok = type(record_id) is str or type(record_id) is int and I64_MIN <= record_id <= U64_MAX
    return ErrorLine(why, record_id if ok else None, obj)


def rejected(obj: dict, contract: Contract, problems: list[str], line: int, record_id: Any,
             count: int | None) -> Rejected:
    """A record parsed as an object that cannot be checked: its schema findings, and which
    required fields it lacks (a field no record of the file has is a typo, said once for
    the file: model/summary.py, absent_fields)."""
    missing = tuple(".".join(p) for p in required_paths(contract) if get_path(obj, p) is MISSING)
    return Rejected([Finding("schema", p, line, record_id) for p in problems], record_id, count,
                    missing, obj)


def required_paths(contract: Contract) -> tuple[tuple[str, ...], ...]:
    """The fields every record must have: the id, the billed count's required terms, the
    ids (unless rebuilt from text) and the template's required placeholders."""
    return _required_paths_of(contract.id_field, contract.count_field, contract.ids_field,
                              contract.text_template)


@functools.lru_cache(maxsize=64)
def _required_paths_of(id_field: Any, count_field: Any, ids_field: Any,
                       template: Any) -> tuple[tuple[str, ...], ...]:
    paths = [id_field] if id_field else []
    if isinstance(count_field, CountSum):
        paths += [t.path for t in count_field.terms if not t.optional]
    else:
        paths.append(count_field)
    if template is None:
        paths.append(ids_field)
    else:
        paths += [ph.path for ph in template.placeholders if not ph.optional]
    return tuple(dict.fromkeys(paths))


@functools.lru_cache(maxsize=64)
def _read_paths_of(count_field: Any, template: Any, finish: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    return (*count_paths(count_field), *(template.paths if template is not None else ()), finish)


def _read_paths(contract: Contract) -> tuple[tuple[str, ...], ...]:
    """The fields read besides the ids, id and where (the fast path must not cut them out)."""
    finish = contract.finish_reason_field if contract.finish_reason else ()
    if type(contract.count_field) is tuple and contract.text_template is None and not finish:
        return (contract.count_field,)
    return _read_paths_of(contract.count_field, contract.text_template, finish)


def template_texts(obj: dict, contract: Contract, problems: list[str]) -> tuple[str, ...] | None:
    """The text of each placeholder of the template (optional missing or null: ''); a
    problem for a required one that is missing or null, and for a value that is not text."""
    template = contract.text_template
    assert template is not None
    texts = []
    for ph in template.placeholders:
        value = get_path(obj, ph.path)
        if type(value) is str:
            texts.append(value)
        elif value is MISSING or value is None:
            if not ph.optional and value is None:
                problems.append(f"text_template: {ph.name} is null; write {{{ph.name}?}} if it "
                                "may be null")
            elif not ph.optional:
                problems.append(f"text_template: missing field {ph.name!r} "
                                f"({why_missing(obj, ph.path)}); write {{{ph.name}?}} if it may be absent")
            texts.append("")
        else:
            problems.append(f"text_template: {ph.name} must be a string, found {_found(value)}")
    return None if len(texts) != len(template.placeholders) else tuple(texts)


def _big_floats(obj: dict, contract: Contract) -> bool:
    """Whether a field the contract reads (or an element of the ids) holds a float that may
    be an integer literal orjson could not hold: those are the ones of magnitude 2**63 or
    more (it turns an integer under -2**63 or over 2**64-1 into a float)."""
    values = [get_path(obj, f) for f in (contract.id_field, *count_paths(contract.count_field)) if f]
    ids = get_path(obj, contract.ids_field)
    if type(ids) is list:
        values += ids
    return any(type(v) is float and not -_BIG < v < _BIG for v in values)


_BIG = float(2**63)


def judge_fields(obj: dict, contract: Contract, with_ids: bool) -> tuple[list[str], Any, Any, Any]:
    """(problems, the id if valid, the billed count if valid, the ids) of a parsed record."""
    problems = []
    record_id = None
    if contract.id_field:
        record_id = get_path(obj, contract.id_field)
        kind = type(record_id)
        if kind is not str and not (kind is int and I64_MIN <= record_id <= U64_MAX):
            problems.append(id_problem(record_id, ".".join(contract.id_field)))
            record_id = None
    count_field = contract.count_field
    if isinstance(count_field, CountSum):
        count = _count_sum(obj, count_field, problems)
    else:
        count = get_path(obj, count_field)
        if not (type(count) is int and 0 <= count <= U64_MAX):
            problems.append(count_problem(count, ".".join(count_field)))
            count = None
    ids = None
    if with_ids:
        ids = get_path(obj, contract.ids_field)
        ids_name = ".".join(contract.ids_field)
        if ids is MISSING and contract.text_template is not None:
            ids = None  # rebuilt from the text (engine/template.py)
        elif ids is MISSING:
            problems.append(f"missing field {ids_name!r}")
        else:
            why = check_ids(ids, ids_name)
            if why:
                problems.append(why)
    return problems, record_id, count, ids


def _count_sum(obj: dict, formula: CountSum, problems: list[str]) -> int | None:
    """The billed count as a sum of fields; an optional addend missing or null counts 0."""
    return sum_terms(((t, get_path(obj, t.path)) for t in formula.terms), formula, problems)


def sum_terms(values: Iterable[tuple[Any, Any]], formula: CountSum, problems: list[str]) -> int | None:
    """A billing formula from (term, value) pairs: terms added or subtracted, then the
    formula's constant. A problem for each term that is not a count (an optional one missing
    or null counts 0), and for a result that is no count (negative, or past 64 bits).
    Parquet rows are summed by it too."""
    total, bad = formula.constant, False
    for term, value in values:
        if term.optional and (value is MISSING or value is None):
            continue
        if type(value) is int and 0 <= value <= U64_MAX:
            total += -value if term.negative else value
        else:
            problems.append(count_problem(value, ".".join(term.path)))
            bad = True
    if bad:
        return None
    if total > U64_MAX:
        problems.append(f"{formula} = {total} is out of range (over 2**64-1)")
        return None
    if total < 0:
        problems.append(f"{formula} = {total}: a billed count cannot be negative")
        return None
    return total


def id_problem(record_id: Any, name: str) -> str:
    if record_id is MISSING:
        return f"missing field {name!r}"
    if not _is_int(record_id):
        return f"{name} must be a string or integer, found {_type_name(record_id)}"
    return f"{name} {_number(record_id)}{_out_of_range(record_id)}"


def count_problem(count: Any, name: str) -> str:
    if count is MISSING:
        return f"missing field {name!r}"
    if not _is_int(count):
        return f"{name} must be an integer, found {_found(count)}"
    if type(count) is int and count < 0 or type(count) is _BigInt and count.text[0] == "-":
        return f"{name} must be non-negative, found {_number(count)}"
    return f"{name} {_number(count)}{_out_of_range(count)}"
