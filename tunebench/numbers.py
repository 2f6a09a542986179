"""Reading numbers from CSV cells and manifests, where a value may be '', None or text."""

from __future__ import annotations

import math
from typing import Any


def to_float(value: Any) -> float | None:
    """The value as a float; None for '', None, text and NaN."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number
