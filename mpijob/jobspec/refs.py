"""What names a job from outside (`get NAME -n NS`, `delete`, `logs`, ...): the same rules
`submit` applies to the job's name and namespace, for every command that takes them, so a
name like `../x` reaches neither a path of the state directory nor a URL (urllib3 folds
`/namespaces/../pods` into `/pods`)."""

from __future__ import annotations

import re

# A job name is an RFC 1035 label (the Service the job gets needs one); a namespace an
# RFC 1123 label (apimachinery validation.IsDNS1123Label) of at most 63 characters.
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_LABEL = 63


def name_problem(name: str) -> str | None:
    if DNS1035.match(name):  # its length is the spec's to judge: with the longest object name
        return None
    return (f"{name!r} is not a valid name: use lower-case letters, digits and '-', "
            "starting with a letter and ending with a letter or digit (e.g. vgg16-run1)")


def namespace_problem(namespace: str) -> str | None:
    if DNS1123_LABEL.match(namespace) and len(namespace) <= MAX_LABEL:
        return None
    return f"{namespace!r} is not a valid namespace (a DNS-1123 label, at most 63 characters)"
