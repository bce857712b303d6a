"""Money by component: what the audited records cost, from their token counts and the prices.

Each part's `spend` channel (checks/money.py fills it) holds per group of field values
[fields, values, records, prompt, cached, output, without prompt]: `fields` are the
`tokaudit_group_by` fields and the price table's, `prompt` the billed prompt tokens (cached
part included), `cached` their cached part, `output` the billed completion tokens, and how
many records had no billed prompt count (their input is unknown, not 0). The prices apply here,
once, for every output (terminal, JSON report, Markdown, HTML) and the `budget_money` check:

    cost = (prompt - cached) * input + cached * cached_input + output * output, per 1e6

`cached_input` unset: the input price. A price table (`tokaudit_prices`, TOML `[[price]]`
tables or CSV) gives prices per group of field values (`provider`, `model`); a group takes
the first row whose fields all match, else the `tokaudit_price_*_per_mtok` keys.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any, Sequence

from ..base.text import plural

CHANNEL = "spend"
COMPONENTS = ("input", "cached_input", "output")
PRICE_COLUMNS = frozenset(COMPONENTS)


class PriceError(ValueError):
    """A price table that cannot be used; the message names the file and the row."""


@dataclass(frozen=True)
class Prices:
    input: float | None = None
    cached_input: float | None = None
    output: float | None = None

    def cost(self, prompt: int, cached: int, output: int) -> dict[str, float | None]:
        """The cost of each component (None: no price for it)."""
        cached_price = self.cached_input if self.cached_input is not None else self.input
        return {
            "input": None if self.input is None else (prompt - cached) * self.input / 1e6,
            "cached_input": None if cached_price is None else cached * cached_price / 1e6,
            "output": None if self.output is None else output * self.output / 1e6,
        }


@dataclass(frozen=True)
class PriceTable:
    fields: tuple[str, ...]
    rows: tuple[tuple[tuple[str, ...], Prices], ...]

    def find(self, fields: tuple[str, ...], values: tuple[str, ...], default: Prices) -> Prices:
        got = dict(zip(fields, values))
        for want, prices in self.rows:
            if all(got.get(f) == v for f, v in zip(self.fields, want) if v != ""):
                return prices
        return default


def _price(value: Any, where: str) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        n = float(value)
    except (TypeError, ValueError):
        raise PriceError(f"{where}: {value!r} is not a price") from None
    if not n >= 0 or n == float("inf"):
        raise PriceError(f"{where}: {value!r} is not a non-negative price")
    return n


def load_table(path: str) -> PriceTable:
    """The price table at `path`, read once per process while it stays as it is."""
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise PriceError(f"tokaudit_prices: cannot read {path}: {exc.strerror}") from None
    return _load(path, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _load(path: str, size: int, mtime: int) -> PriceTable:
    rows: list[dict[str, Any]]
    if path.endswith(".toml"):
        try:
            import tomllib  # type: ignore[import-not-found,unused-ignore]  # 3.11+
        except ImportError:  # Python 3.10
            raise PriceError("tokaudit_prices: a TOML table needs Python 3.11; write it as CSV") from None
        with open(path, "rb") as fh:
            try:
                data = tomllib.load(fh)
            except tomllib.TOMLDecodeError as exc:
                raise PriceError(f"tokaudit_prices: {path}: {exc}") from None
        rows = data.get("price")
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise PriceError(f"tokaudit_prices: {path} has no [[price]] tables")
    else:
        import csv  # here: a run without a CSV price table does not import it (start-up)

        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    fields = tuple(dict.fromkeys(k for r in rows for k in r if k not in PRICE_COLUMNS))
    out = []
    for n, row in enumerate(rows, 1):
        where = f"tokaudit_prices: {path}, row {n}"
        values = tuple("" if row.get(f) is None else str(row[f]) for f in fields)
        out.append((values, Prices(*(_price(row.get(c), f"{where}, {c}") for c in COMPONENTS))))
    return PriceTable(fields, tuple(out))


def priced(contract: Any) -> bool:
    """Whether the run counts money by component."""
    return bool(contract.prices or contract.budget_money is not None
                or any(p is not None for p in (contract.price_input_per_mtok,
                                               contract.price_cached_input_per_mtok,
                                               contract.price_output_per_mtok)))


def table_fields(contract: Any) -> tuple[str, ...]:
    """The fields a part's spend is grouped by: tokaudit_group_by's, then the table's."""
    fields = list(contract.group_by)
    if contract.prices:
        fields += [f for f in load_table(contract.prices).fields if f not in fields]
    return tuple(fields)


def spend(channels: list[tuple[str, list[Any]]], contract: Any) -> dict[str, Any]:
    """The spend of every file by component and by group (tokaudit_group_by's values), in
    the prices' currency: what the outputs show and budget_money judges."""
    table = load_table(contract.prices) if contract.prices else None
    default = Prices(contract.price_input_per_mtok, contract.price_cached_input_per_mtok,
                     contract.price_output_per_mtok)
    tokens = dict.fromkeys(COMPONENTS, 0)
    cost: dict[str, float | None] = dict.fromkeys(COMPONENTS)  # None: no price for it
    groups: dict[tuple[str, ...], dict[str, Any]] = {}
    unpriced = no_prompt = 0
    for _, values in channels:
        for fields, key, records, prompt, cached, output, *rest in values:
            no_prompt += rest[0] if rest else 0
            fields, key = tuple(fields), tuple(key)
            prices = table.find(fields, key, default) if table else default
            parts = prices.cost(prompt, cached, output)
            shown = tuple(v for f, v in zip(fields, key) if f in contract.group_by)
            group = groups.setdefault(shown, {"records": 0, **dict.fromkeys(COMPONENTS, 0), "cost": 0.0})
            group["records"] += records
            missed = False
            for name, n in zip(COMPONENTS, (prompt - cached, cached, output)):
                tokens[name] += n
                group[name] += n
                c = parts[name]
                if c is None:
                    missed = missed or bool(n)
                    continue
                group["cost"] += c
                cost[name] = (cost[name] or 0.0) + c
            unpriced += records if missed else 0
    total = sum(c for c in cost.values() if c)
    return {
        "components": {name: {"tokens": tokens[name], "cost": cost[name]} for name in COMPONENTS},
        "total": total,
        "by_group": [{"group": dict(zip(contract.group_by, key)), **g}
                     for key, g in sorted(groups.items())] if contract.group_by else [],
        "unpriced_records": unpriced,
        "records_without_prompt_count": no_prompt,
    }


def amount(value: float | None) -> str:
    """Money as shown: $1,234.56, or 4 decimals below one."""
    if value is None:
        return "no price"
    return f"${value:,.2f}" if value >= 1 or value == 0 else f"${value:.4f}"


def of_run(files: Sequence[Any], contract: Any) -> dict[str, Any] | None:
    """A run's spend (spend() of its file summaries' channels) for the outputs: None when
    unpriced, {"error": ...} when the price table cannot be used."""
    if not priced(contract):
        return None
    try:
        return spend([(s.path, s.channels.get(CHANNEL, [])) for s in files], contract)
    except PriceError as exc:
        return {"error": str(exc)}


def lines(result: dict[str, Any]) -> list[str]:
    """The spend as text lines (terminal, Markdown): by component, then by group."""
    if "error" in result:
        return [f"spend: {result['error']}"]
    comps = result["components"]
    parts = [f"{name.replace('_', ' ')} {comps[name]['tokens']:,} tokens {amount(comps[name]['cost'])}"
             for name in COMPONENTS]
    out = [f"spend {amount(result['total'])}: " + ", ".join(parts)]
    for g in result["by_group"]:
        name = ", ".join(f"{k}={v}" for k, v in g["group"].items())
        out.append(f"  {name}: {amount(g['cost'])} ({plural(g['records'], 'record')}; input {g['input']:,}, "
                   f"cached {g['cached_input']:,}, output {g['output']:,} tokens)")
    if result.get("records_without_prompt_count"):
        out.append(f"  {plural(result['records_without_prompt_count'], 'record')} without a billed prompt "
                   "count (tokaudit_prompt_count_field): their input is not in the spend")
    if result["unpriced_records"]:
        out.append(f"  {plural(result['unpriced_records'], 'record')} with tokens of a component that has no price")
    return out
