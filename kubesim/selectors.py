"""Label and field selectors with the apimachinery grammar and semantics."""

from __future__ import annotations

import re

from .errors import bad_request

_KEY_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_./]*)?[A-Za-z0-9]$")
_SET_RE = re.compile(r"^\s*(!?)\s*([^\s!=<>(),]+)\s*(?:(in|notin)\s*\((.*)\)|(==|=|!=|>|<)\s*(.*?))?\s*$")


def _split_terms(s: str) -> list[str]:
    """Split on commas that are not inside an `in (...)` value list."""
    terms, depth, cur = [], 0, []
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    terms.append("".join(cur))
    return [t for t in (t.strip() for t in terms) if t]


class LabelSelector:
    """A parsed selector: a conjunction of (key, operator, values) requirements."""

    def __init__(self, reqs: list[tuple[str, str, tuple[str, ...]]] | None = None):
        self.reqs = reqs or []

    @property
    def empty(self) -> bool:
        return not self.reqs

    @classmethod
    def parse(cls, text: str | None) -> LabelSelector:
        if not text:
            return cls()
        reqs = []
        for term in _split_terms(text):
            m = _SET_RE.match(term)
            if not m:
                raise bad_request(f"unable to parse requirement: invalid label selector: {term!r}")
            neg, key, setop, setvals, op, val = m.groups()
            if not _KEY_RE.match(key):
                raise bad_request(
                    f"unable to parse requirement: values[0][{key}]: Invalid value: {key!r}: "
                    "name part must consist of alphanumeric characters, '-', '_' or '.'")
            if neg:
                if setop or op:
                    raise bad_request(f"unable to parse requirement: {term!r}")
                reqs.append((key, "DoesNotExist", ()))
            elif setop:
                vals = tuple(v.strip() for v in setvals.split(",") if v.strip())
                reqs.append((key, "In" if setop == "in" else "NotIn", vals))
            elif op:
                kind = {"=": "In", "==": "In", "!=": "NotIn", ">": "Gt", "<": "Lt"}[op]
                reqs.append((key, kind, (val.strip(),)))
            else:
                reqs.append((key, "Exists", ()))
        return cls(reqs)

    @classmethod
    def from_api(cls, sel: dict | None) -> LabelSelector:
        """metav1.LabelSelector (matchLabels + matchExpressions)."""
        reqs = []
        for k, v in ((sel or {}).get("matchLabels") or {}).items():
            reqs.append((k, "In", (v,)))
        for e in (sel or {}).get("matchExpressions") or []:
            reqs.append((e["key"], e["operator"], tuple(e.get("values") or ())))
        return cls(reqs)

    def matches(self, labels: dict | None) -> bool:
        labels = labels or {}
        for key, op, vals in self.reqs:
            present = key in labels
            v = labels.get(key)
            if op == "In":
                if not present or v not in vals:
                    return False
            elif op == "NotIn":
                if present and v in vals:
                    return False
            elif op == "Exists":
                if not present:
                    return False
            elif op == "DoesNotExist":
                if present:
                    return False
            elif op in ("Gt", "Lt"):
                try:
                    have, want = int(v), int(vals[0])
                except (TypeError, ValueError):
                    return False
                if (op == "Gt" and not have > want) or (op == "Lt" and not have < want):
                    return False
        return True


def _as_field_value(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


class FieldSelector:
    """Field selectors only support =, == and != on a per-kind whitelist of fields."""

    def __init__(self, terms: list[tuple[str, bool, str]] | None = None):
        self.terms = terms or []

    @property
    def empty(self) -> bool:
        return not self.terms

    @classmethod
    def parse(cls, text: str | None, supported: dict) -> FieldSelector:
        if not text:
            return cls()
        terms = []
        for term in _split_terms(text):
            m = re.match(r"^([^=!]+?)\s*(==|=|!=)\s*(.*)$", term)
            if not m:
                raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
            key, op, val = m.group(1).strip(), m.group(2), m.group(3).strip()
            if key not in supported:
                raise bad_request(f"field label not supported: {key}")
            terms.append((key, op != "!=", val))
        return cls(terms)

    def matches(self, obj: dict, supported: dict) -> bool:
        for key, positive, val in self.terms:
            have = _as_field_value(supported[key](obj))
            if (have == val) != positive:
                return False
        return True
