"""Values of repeatable command-line options: `--selector k=v`, `-e K=V`, `--extra-resource NAME=N`.

Pure parsers shared by `plan` and `submit`; a bad value raises `SpecError(option, ...)`
so the CLI can name the option and say what it expects.
"""

from __future__ import annotations

from mpijob.errors import SpecError


def parse_key_value(text: str, option: str) -> tuple[str, str]:
    """'k=v' -> ('k', 'v'). The value may be empty or contain '='; the key may not be empty."""
    key, sep, value = str(text).partition("=")
    key = key.strip()
    if not sep or not key:
        raise SpecError(option, f"expected KEY=VALUE, got {text!r}")
    return key, value




def parse_count(text: str, option: str) -> tuple[str, int]:
    """'NAME=N' -> ('NAME', N), N a whole number."""
    name, count = parse_key_value(text, option)
    if not count.isdigit():
        raise SpecError(option, f"{text}: expected NAME=N with a whole number N")
    return name, int(count)
