"""The count rules, each written once: every check, pass and output calls these.

- The signed difference of a record is **billed minus counted**: `+65` means the provider
  billed 65 tokens more than the record holds, `-65` fewer. The failure text, the worst
  records table, the HTML page and its tooltips, the JSON report, the failures file, the
  Markdown summary and the annotations all show this one number.
- A record is within the count tolerance when |billed - counted| <=
  max(tokaudit_count_abs, tokaudit_count_rel x billed).
- A file's mean is within its tolerance when mean |diff| <= max(tokaudit_count_mean_abs,
  tokaudit_count_mean_rel x mean billed) (off when tokaudit_count_mean_rel is empty).

The vectorised passes (engine/columnar.py) call the same functions with numpy arrays:
`count_tolerance(contract, billed, np.maximum)` is the scalar rule, element-wise.
"""

from __future__ import annotations

from typing import Any, Callable


def signed_difference(billed: Any, counted: Any) -> Any:
    """billed - counted: positive when the provider billed more tokens than the record has
    (ints, or int64 arrays for the columnar pass)."""
    return billed - counted


def count_tolerance(contract: Any, billed: Any, maximum: Callable[[Any, Any], Any] = max) -> Any:
    """The largest |billed - counted| a record billed `billed` may have:
    max(tokaudit_count_abs, tokaudit_count_rel x billed). `billed` may be a float array
    with `maximum=np.maximum` (the same rule over a batch)."""
    return maximum(contract.count_abs, contract.count_rel * billed)


def tolerance_text(contract: Any, billed: str = "") -> str:
    """The count tolerance as every output words it: 'max(8, 2%)', or with `billed` (a
    billed count, formatted) 'max(8, 2% x 1,234)'."""
    rel = f"{contract.count_rel:.2%}".replace(".00%", "%")
    return f"max({contract.count_abs}, {rel}{' x ' + billed if billed else ''})"


def count_within(contract: Any, billed: int, counted: int) -> bool:
    """Whether a record's counts are within the count tolerance (runs once per record:
    |signed_difference| written out)."""
    return abs(billed - counted) <= count_tolerance(contract, billed)


def beyond_outlier_max(contract: Any, billed: int, counted: int) -> bool:
    """Whether a record's |billed - counted| passes tokaudit_count_outlier_max: never an
    allowed outlier."""
    limit = contract.count_outlier_max
    if limit is None:
        return False
    most = limit.value * billed if limit.relative else limit.value
    return abs(signed_difference(billed, counted)) > most


def difference_text(billed: int, counted: int) -> str:
    """'+65, +16.7%': the signed difference and its share of the billed count."""
    diff = signed_difference(billed, counted)
    return f"{diff:+d}" + (f", {diff / billed:+.1%}" if billed else "")


def mean_tolerance(contract: Any, mean_billed: float) -> float | None:
    """The largest mean |diff| a file of this mean billed count may have:
    max(tokaudit_count_mean_abs, tokaudit_count_mean_rel x mean billed); None when the
    mean check is off."""
    rel = contract.count_mean_rel
    if rel is None:
        return None
    return max(contract.count_mean_abs, rel * mean_billed)


def mean_within(contract: Any, records: int, billed: int, absdiff: int) -> bool:
    """Whether `records` records' summed |diff| is within the mean tolerance (kept in sums:
    absdiff <= max(mean_abs x records, mean_rel x billed), exact for integers)."""
    rel = contract.count_mean_rel
    if rel is None or not records:
        return True
    if not billed:  # nothing billed: no share to judge, only the tokens
        return not contract.count_mean_abs or absdiff <= contract.count_mean_abs * records
    return absdiff <= max(contract.count_mean_abs * records, rel * billed)
