"""Name/label validation with apimachinery's exact error texts.

Launchers generate names from user input; the real server rejects bad ones with a
422, so this fake must too or those bugs only show up on a cluster.
"""

from __future__ import annotations

import json
import re

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                 "characters, '-' or '.', and must start and end with an alphanumeric character "
                 "(e.g. 'example.com', regex used for validation is "
                 "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_1123_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                  "or '-', and must start and end with an alphanumeric character (e.g. 'my-name',"
                  "  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
LABEL_1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                  "start with an alphabetic character, and end with an alphanumeric character "
                  "(e.g. 'my-name',  or 'abc-123', regex used for validation is "
                  "'[a-z]([-a-z0-9]*[a-z0-9])?')")
_QN_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
           "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
           "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', "
              "'_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',"
              "  or 'my_value',  or '12345', regex used for validation is "
              "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


def q(v) -> str:
    """Go's %q of a value, as used in 'Invalid value: "x"'."""
    return json.dumps(v) if isinstance(v, str) else str(v)


def check_name(name: str, rule: str) -> list[str]:
    """rule: 'subdomain' | 'label' (RFC 1123) | 'dns1035'. Returns error texts."""
    errs = []
    if rule == "subdomain":
        if len(name) > 253:
            errs.append("must be no more than 253 characters")
        if not _SUBDOMAIN.match(name):
            errs.append(SUBDOMAIN_MSG)
    else:
        if len(name) > 63:
            errs.append("must be no more than 63 characters")
        regex, msg = (_LABEL_1035, LABEL_1035_MSG) if rule == "dns1035" else (_LABEL_1123,
                                                                              LABEL_1123_MSG)
        if not regex.match(name):
            errs.append(msg)
    return errs


def check_labels(labels, field: str) -> list[tuple[str, str]]:
    out = []
    for k, v in (labels or {}).items():
        out += [(field, m) for m in _check_key(k)]
        if not isinstance(v, str):
            out.append((field, f"Invalid value: {q(v)}: must be a string"))
            continue
        if len(v) > 63:
            out.append((field, f"Invalid value: {q(v)}: must be no more than 63 characters"))
        if not _LABEL_VALUE.match(v):
            out.append((field, f"Invalid value: {q(v)}: {_VALUE_MSG}"))
    return out


def check_annotations(annotations, field: str) -> list[tuple[str, str]]:
    out = []
    total = 0
    for k, v in (annotations or {}).items():
        out += [(field, m) for m in _check_key(k)]
        if not isinstance(v, str):
            out.append((field, f"Invalid value: {q(v)}: must be a string"))
            continue
        total += len(k) + len(v)
    if total > 256 * 1024:
        out.append((field, f"Too long: may not be more than {256 * 1024} bytes"))
    return out


def _check_key(k: str) -> list[str]:
    prefix, _, name = k.rpartition("/")
    errs = []
    if prefix and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        errs.append(f"Invalid value: {q(k)}: prefix part {SUBDOMAIN_MSG}")
    if not name:
        errs.append(f"Invalid value: {q(k)}: name part must be non-empty")
    else:
        if len(name) > 63:
            errs.append(f"Invalid value: {q(k)}: name part must be no more than 63 characters")
        if not _QUALIFIED_NAME.match(name):
            errs.append(f"Invalid value: {q(k)}: {_QN_MSG}")
    return errs
