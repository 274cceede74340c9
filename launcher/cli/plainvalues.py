"""Option values that need no conversion, passed through without pydantic.

typer 0.29 converts every option's value, a default None included, through a pydantic
TypeAdapter it builds on first use: the first option of any command imports pydantic
(~60 ms of CPU, a sixth of `hvdk8s list -A`), although nearly every value is already what
it should be: None, a string for a `str` option, a bool for a flag, one of a choice's
strings. Those pass through here unchanged, exactly as typer's adapter would return them;
anything else (a number typed as text, a path, a range to check) goes to typer's own
conversion, built when first needed, so that its errors stay typer's.
"""

from __future__ import annotations

from typing import Any, Literal, get_args, get_origin


class PlainValues:
    """A typer parameter's runtime conversion (the `coerce` its process_value calls)."""

    def __init__(self, descriptor: Any):
        self.descriptor = descriptor
        annotation = descriptor.annotation
        self.annotation = annotation
        info = descriptor.parameter_info
        # Conversions that do more than type-check: a click type, a path's checks, a range,
        # dates. Those always go to typer. A parser of the command's own is run here, and its
        # answer kept where it is a plain value (else typer runs it again, and says why not).
        self.special = bool(getattr(info, "click_type", None) or descriptor.is_path
                            or descriptor.is_ranged or descriptor.is_datetime)
        self.parser = getattr(info, "parser", None)
        choices = descriptor.choices
        self.choices = frozenset(choices) if choices is not None else None
        self.plain_choices = annotation is str or get_origin(annotation) is Literal
        self.list_of_str = get_origin(annotation) is list and get_args(annotation) == (str,)
        self._typer: Any = None

    def _plain(self, value: Any) -> bool:
        if self.special:
            return False
        annotation = self.annotation
        if self.choices is not None:  # a choice's own string, exactly (an Enum's is not)
            return self.plain_choices and type(value) is str and value in self.choices
        if annotation is str or annotation is bool or annotation is int:
            return type(value) is annotation
        return False

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        many = param.multiple or param.nargs == -1
        if value is None:  # as typer's RuntimeParam.coerce
            return () if many else None
        if self.parser is not None:
            if not many and type(value) is str:
                try:
                    parsed = self.parser(value)
                except Exception:  # noqa: BLE001 - typer runs it again and reports it
                    parsed = None
                if parsed is not None and self._plain(parsed):
                    return parsed
        elif self._plain(value):
            return value
        if (self.list_of_str and not self.special and self.parser is None
                and self.choices is None and isinstance(value, list | tuple)
                and all(type(v) is str for v in value)):
            return list(value)
        if self._typer is None:
            from typer._coercion import build_runtime_param

            self._typer = build_runtime_param(self.descriptor)
        return self._typer.coerce(value, param=param, ctx=ctx)


def install() -> None:
    """Once per process: typer parameters (options, arguments, and the help option click
    adds late) take PlainValues as their conversion, built when first asked for as
    typer's own is (typer.core._TyperParameter.get_runtime_param; typer is pinned to
    0.29.x in pyproject: without that hook, typer's conversion is left in place)."""
    try:
        from typer.core import _TyperParameter
    except ImportError:  # pragma: no cover - another typer: its own conversion stays
        return
    if getattr(_TyperParameter, "_plain_values", False):
        return
    typers_own = _TyperParameter.get_runtime_param

    def get_runtime_param(self: Any) -> Any:
        if self._runtime_param is None and self.type_descriptor.file_annotation is None:
            self._runtime_param = PlainValues(self.type_descriptor)
        return typers_own(self)

    _TyperParameter.get_runtime_param = get_runtime_param  # type: ignore[method-assign]
    _TyperParameter._plain_values = True  # type: ignore[attr-defined]
