"""Container image references, checked by the distribution grammar before anything runs.

A reference the kubelet cannot parse fails its pod as InvalidImageName only once the pod
is on a node, GPUs held, so `--image` is checked here by the grammar of
github.com/distribution/reference (reference.go, regexp.go), which the kubelet's image
service parses with (ParseNormalizedNamed):

    reference        := name [ ":" tag ] [ "@" digest ]
    name             := [domain "/"] path-component ["/" path-component]*
    domain           := host [":" port-number]
    host             := domain-name | IPv4address | "[" IPv6address "]"
    domain-name      := domain-component ["." domain-component]*
    domain-component := /([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])/
    path-component   := /[a-z0-9]+/ [separator /[a-z0-9]+/]*
    separator        := /[_.]|__|[-]+/
    tag              := /[\\w][\\w.-]{0,127}/
    digest           := algorithm ":" hex, algorithm := /[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*/

The first component is a domain only if it has a "." or ":" or is "localhost" (or has an
upper-case letter, which a path may not have): `IMG` is then a domain with no path, as
distribution's splitDockerDomain reads it, and refused. Pure.
"""

from __future__ import annotations

import re

_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[_.]|__|-+)[a-z0-9]+)*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_PATH = re.compile(rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*")
_DOMAIN_RE = re.compile(_DOMAIN)
_TAG_RE = re.compile(_TAG)
_DIGEST_RE = re.compile(_DIGEST)
NAME_MAX = 255  # distribution's NameTotalLengthMax


def image_problem(ref: str) -> str | None:
    """Why `ref` is not an image reference, or None when it is one."""
    rest, digest = ref, None
    if "@" in rest:
        rest, _, digest = rest.partition("@")
        if not _DIGEST_RE.fullmatch(digest):
            return f"the digest {digest!r} is not ALGORITHM:HEX (e.g. sha256:...)"
    name, tag = rest, None
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        name, _, tag = rest.rpartition(":")
        if not _TAG_RE.fullmatch(tag):
            return (f"the tag {tag!r} may hold only letters, digits, '_', '.' and '-' (not "
                    "first), at most 128")
    if not name:
        return "it has no name"
    if len(name) > NAME_MAX:
        return f"the name is longer than {NAME_MAX} characters"
    first, slash, path = name.partition("/")
    is_domain = slash and ("." in first or ":" in first or first == "localhost"
                           or first.lower() != first)
    if is_domain:
        if not _DOMAIN_RE.fullmatch(first):
            return f"the registry {first!r} is not a host[:port]"
    else:
        path = name
    if not _PATH.fullmatch(path):
        lower = " (upper case is not allowed)" if path.lower() != path else ""
        return (f"the repository {path!r} must be lower-case letters and digits, separated "
                f"by '/', '.', '_', '__' or '-'{lower}")
    return None
