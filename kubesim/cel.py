"""CEL for the admission-policy model: cel-python (a real CEL implementation: parser,
macros such as has()/all()/exists(), map and list access, the standard string functions)
plus the Kubernetes CEL library functions it lacks, each as the library defines it:

- cel-go ext.Strings, which kube-apiserver's base environment enables
  (k8s.io/apiserver/pkg/cel/environment/base.go): charAt, indexOf, lastIndexOf, lowerAscii,
  upperAscii, replace, split, substring, trim, join;
- k8s.io/apiserver/pkg/cel/library/regex.go: find, findAll;
- k8s.io/apiserver/pkg/cel/library/lists.go: isSorted, sum, min, max (indexOf and
  lastIndexOf on lists too).

Not provided: the optional syntax (`a.?b`, `[?k]`), quantity(), url(), ip()/cidr(), sets,
authorizer: an expression using them fails to compile or evaluate, which the policy's
failurePolicy then judges, never a silent pass.

Imported only where a policy is bound, so `hvdk8s dev cluster` without the dev extra still
runs; then the first policy evaluated answers 500 saying what to install.
"""

from __future__ import annotations

import json
import re
from typing import Any

from . import errors

try:
    import celpy
    from celpy import celtypes
except ImportError:  # pragma: no cover - the dev extra installs it
    raise errors.internal("evaluating ValidatingAdmissionPolicies needs cel-python: "
                          "pip install 'hvdk8s[devcluster]'") from None


def _is_list(x) -> bool:
    return isinstance(x, (list, celtypes.ListType))


def _index_of(target, item, start=0):
    if _is_list(target):
        items = list(target)
        return celtypes.IntType(items.index(item) if item in items else -1)
    return celtypes.IntType(str(target).find(str(item), int(start)))


def _last_index_of(target, item, end=None):
    if _is_list(target):
        items = list(target)
        return celtypes.IntType(len(items) - 1 - items[::-1].index(item) if item in items
                                else -1)
    text = str(target)
    return celtypes.IntType(text.rfind(str(item), 0, None if end is None
                                       else int(end) + len(str(item))))


def _replace(text, old, new, count=-1):
    return celtypes.StringType(str(text).replace(str(old), str(new), int(count)))


def _split(text, sep, limit=-1):
    limit = int(limit)
    if limit == 0:
        return celtypes.ListType([])
    parts = str(text).split(str(sep), limit - 1) if limit > 0 else str(text).split(str(sep))
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


def _substring(text, start, end=None):
    text, start = str(text), int(start)
    stop = len(text) if end is None else int(end)
    if not 0 <= start <= stop <= len(text):
        raise ValueError(f"index out of range: {start if start > len(text) else stop}")
    return celtypes.StringType(text[start:stop])


def _char_at(text, index):
    text, index = str(text), int(index)
    if not 0 <= index <= len(text):
        raise ValueError(f"index out of range: {index}")
    return celtypes.StringType(text[index:index + 1])


def _join(items, sep=""):
    return celtypes.StringType(str(sep).join(str(i) for i in items))


def _find(text, pattern):
    match = re.search(str(pattern), str(text))
    return celtypes.StringType(match.group(0) if match else "")


def _find_all(text, pattern, limit=-1):
    found = [m.group(0) for m in re.finditer(str(pattern), str(text))]
    if int(limit) >= 0:
        found = found[:int(limit)]
    return celtypes.ListType([celtypes.StringType(f) for f in found])


def _is_sorted(items):
    items = list(items)
    return celtypes.BoolType(all(a <= b for a, b in zip(items, items[1:], strict=False)))


def _sum(items):
    items = list(items)
    return sum(items[1:], items[0]) if items else celtypes.IntType(0)


def _min(items):
    items = list(items)
    if not items:
        raise ValueError("min called on empty list")
    return min(items)


def _max(items):
    items = list(items)
    if not items:
        raise ValueError("max called on empty list")
    return max(items)


FUNCTIONS: dict[str, Any] = {
    "charAt": _char_at, "indexOf": _index_of, "lastIndexOf": _last_index_of,
    "lowerAscii": lambda s: celtypes.StringType(str(s).lower()),
    "upperAscii": lambda s: celtypes.StringType(str(s).upper()),
    "replace": _replace, "split": _split, "substring": _substring,
    "trim": lambda s: celtypes.StringType(str(s).strip()), "join": _join,
    "find": _find, "findAll": _find_all,
    "isSorted": _is_sorted, "sum": _sum, "min": _min, "max": _max,
}

_ENV = celpy.Environment()


def compile_expression(expression: str):
    """A program, or why it does not compile as cel-go's compiler words it
    (plugin/cel/compile.go: "compilation failed: " + the issues)."""
    try:
        ast = _ENV.compile(expression)
    except celpy.CELParseError as e:
        return f"compilation failed: ERROR: <input>: {str(e).splitlines()[0]}"
    return _ENV.program(ast, functions=FUNCTIONS)


def activation(values: dict) -> dict:
    return {k: celpy.json_to_cel(v) for k, v in values.items()}


def variables(programs: list, env: dict):
    """spec.variables in order, each seeing those before it; a failing one is an error
    value, which fails only the expressions that use it (composition.go evaluates them
    lazily)."""
    out: Any = celtypes.MapType({})
    env["variables"] = out
    for name, program in programs:
        key = celtypes.StringType(name)
        # plugin/cel/composition.go variableAccessor.Callback's words
        if isinstance(program, str):
            out[key] = celpy.CELEvalError(
                f"composited variable {json.dumps(name)} fails to compile: {program}")
            continue
        try:
            out[key] = program.evaluate(env)
        except Exception as e:
            out[key] = celpy.CELEvalError(
                f"composited variable {json.dumps(name)} fails to evaluate: {error_text(e)}")
    return out


def to_python(value):
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, celtypes.StringType):
        return str(value)
    return value


_NO_KEY = re.compile(r"no such member in mapping: '(.*)'")


def error_text(e: Exception) -> str:
    """cel-go's words for the common runtime errors ("no such key: x")."""
    text = str(e.args[0]) if e.args else str(e)
    match = _NO_KEY.search(text)
    if match:
        return f"no such key: {match.group(1)}"
    return text
