"""How numbers look in every table, line and report: one set of formatters.

Missing values (None, "", NaN, text that is no number) show as "-", never as 0.
"""

from __future__ import annotations

import math
from typing import Any

MISSING = "-"


def as_number(value: Any) -> float | None:
    """`value` as a float, or None when it is missing or not a number."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        number_ = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number_) else number_


def number(value: Any, digits: int = 1) -> str:
    """Fixed decimals: number(3.14159, 2) == "3.14"; missing -> "-"."""
    found = as_number(value)
    return MISSING if found is None else f"{found:.{digits}f}"


def sig(value: Any, digits: int = 3) -> str:
    """Significant digits: sig(0.012345) == "0.0123", sig(6270.4) == "6.27e+03"."""
    found = as_number(value)
    return MISSING if found is None else f"{found:.{digits}g}"


def readable(value: Any, digits: int = 3) -> str:
    """`sig` without exponents for a reader's sentence: readable(1359.4) == "1359",
    readable(2.874) == "2.87" (a figure that would read 1e+03 or more is a whole number)."""
    found = as_number(value)
    if found is None:
        return MISSING
    text = f"{found:.{digits}g}"
    return f"{found:.0f}" if "e+" in text else text


def signed_pct(value: Any, digits: int = 1) -> str:
    """A change in percent with its sign: "+4.2%"."""
    found = as_number(value)
    return MISSING if found is None else f"{found:+.{digits}f}%"


def cell(value: Any, digits: int | None) -> str:
    """A table cell: text as it is (digits None), numbers to `digits` decimals."""
    if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if digits is None:
        return str(value)
    found = as_number(value)
    return str(value) if found is None else f"{found:.{digits}f}"


def plural(count: int, noun: str) -> str:
    """ "1 configuration", "2 configurations"."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
