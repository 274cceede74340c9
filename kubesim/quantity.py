"""resource.Quantity for the test API server: parsing (the product's own parser, so there is one
grammar), validation and how the API server prints quantities back."""

from __future__ import annotations

from decimal import Decimal

from mpijob.jobspec import quantity as product

# The API server's own message for a value that is not a quantity.
_NOT_A_QUANTITY = ("quantities must match the regular expression "
                   "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")


def parse_quantity(q) -> Decimal:
    """The product's parser (one grammar for both), with the API server's error text."""
    if isinstance(q, bool):
        raise ValueError(_NOT_A_QUANTITY)
    try:
        return product.parse_quantity(q)
    except product.QuantityError:
        raise ValueError(_NOT_A_QUANTITY) from None


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
