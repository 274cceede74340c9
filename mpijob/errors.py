"""Errors of the pure core. `field` names the spec field so the CLI can name the option."""

from __future__ import annotations


class SpecError(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
