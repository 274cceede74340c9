"""Errors that reach the user as one line, with the exit code they imply."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mpijob.errors import SpecError


class UserError(Exception):
    """A problem the user can fix; printed as one line without a traceback."""

    exit_code = 1

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(UserError):
    """A bad option value: exit 2, as click does for usage errors."""

    exit_code = 2

    @classmethod
    def naming_option(cls, err: SpecError) -> UsageError:
        """A spec problem as the CLI reports it: the option that sets the field (its
        `Flag`), then what is wrong."""
        made = cls(f"{err.where}: {err.message}")
        made.option, made.detail = err.where, err.message
        return made

    option: str | None = None  # the option it names (naming_option), and what is wrong
    detail: str | None = None


class Refused(UsageError):
    """A request the cluster (or this machine) cannot serve as asked, refused before
    anything is created: exit 2, as `submit --help` says (no room for it, a mode whose
    software is not installed, a name in use, GPUs this machine does not have)."""


class NotFound(UserError):
    exit_code = 1


class Timeout(UserError):
    """`wait` ran out of time: 124, like timeout(1)."""

    exit_code = 124
