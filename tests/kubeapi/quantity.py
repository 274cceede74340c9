"""resource.Quantity parsing ("500m", "16Gi", "1e3") for scheduling arithmetic."""

from __future__ import annotations

import re
from decimal import Decimal

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9),
            "T": Decimal(10**12), "P": Decimal(10**15), "E": Decimal(10**18)}
_RE = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?")


def parse_quantity(q) -> Decimal:
    if isinstance(q, bool):
        raise ValueError(f"quantities must match the regular expression: {q!r}")
    if isinstance(q, (int, float)):
        return Decimal(str(q))
    m = _RE.fullmatch(str(q).strip())
    if not m:
        raise ValueError(
            "quantities must match the regular expression "
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    number = Decimal(m.group(1))
    if m.group(2):
        return number * (Decimal(10) ** int(m.group(2)[1:]))
    suffix = m.group(3) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    return number * _DECIMAL[suffix]


def is_quantity(q) -> bool:
    try:
        parse_quantity(q)
    except (ValueError, ArithmeticError):
        return False
    return True


def canonical(value) -> str:
    """JSON numbers in resource maps come back as strings, as the apiserver returns them."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value == int(value):
            return str(int(value))
        return f"{int(round(value * 1000))}m"
    return str(value)


def fmt(d: Decimal) -> str:
    """Compact rendering for messages."""
    if d == d.to_integral_value():
        return str(int(d))
    return f"{int(d * 1000)}m"
