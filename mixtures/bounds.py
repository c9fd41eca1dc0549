"""Numbers with a stated finite range, for the settings of recipes and mixture search.

Every number a recipe or a search config holds is a typed field with both ends stated (`between(lo,
hi)`), checked when the file loads, so a value past either end is refused with its key and the whole
range before anything runs:

    search.yaml (with overrides): transfer.token_multiple: must be greater than or equal to 4 and less
    than or equal to 1000, got 1e+308

Unbounded, such values failed far from their key: `transfer.token_multiple=1e308` overflowed
`math.ceil` into an OverflowError traceback, `cost.core_flops=1e-320` printed `~inf core-hours` with
exit 0, `max_epochs: 1e308` made `floor(cap * pool)` raise in the plan. Infinity and NaN are refused
before the range by core.config (`allow_inf_nan=False`), booleans by its `_strict_booleans`.

The range is kept on the field (`Range`, in its metadata), so a test can find every numeric field and
check that each has one (tests/mixtures/test_bounds.py), and a field added later without one fails it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

__all__ = ["Range", "between", "range_of"]


@dataclass(frozen=True, slots=True)
class Range:
    """The closed interval [lo, hi] a field's value must lie in (pydantic ignores this metadata; the
    check is the AfterValidator beside it)."""

    lo: float
    hi: float

    def text(self) -> str:
        # pydantic's words for one bound (`Field(ge=...)`), which the other configs' messages use
        return f"greater than or equal to {_fmt(self.lo)} and less than or equal to {_fmt(self.hi)}"


def _fmt(x: float) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{x:g}"


def between(kind: type, lo: float, hi: float) -> Any:
    """`kind` (int or float) in [lo, hi], refused otherwise with the key and the range."""
    rng = Range(lo, hi)

    def check(value: Any) -> Any:
        if not lo <= value <= hi:
            raise PydanticCustomError("number_range", "must be " + rng.text())
        return value

    return Annotated[kind, AfterValidator(check), rng]


def range_of(metadata: list[Any]) -> Range | None:
    """The Range among a field's metadata (pydantic's FieldInfo.metadata), if it has one."""
    return next((m for m in metadata if isinstance(m, Range)), None)
