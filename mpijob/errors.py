"""Errors of the pure core. `field` names the spec field and `option`, where known, the
command-line option that sets it (mpijob.jobspec.spec.Flag), so the CLI can name it."""

from __future__ import annotations


class SpecError(ValueError):
    def __init__(self, field: str, message: str, option: str | None = None):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.option = option

    def set_by(self, option: str | None) -> SpecError:
        """This error, naming the option that sets its field (kept if already named)."""
        self.option = self.option or option
        return self

    @property
    def where(self) -> str:
        """What to change: the option when one sets the field, else the field."""
        return self.option or self.field
