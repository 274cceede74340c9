"""The API server's impersonation filter (k8s.io/apiserver/pkg/endpoints/filters/
impersonation.go, WithImpersonation and buildImpersonationRequests): a request carrying
Impersonate-User, -Uid, -Group (repeated) or -Extra-KEY headers runs as that user, once the
authorizer has allowed the caller the `impersonate` verb on each thing asked for:

- users (core group), or serviceaccounts in their namespace for
  `system:serviceaccount:NS:NAME` (then, without groups asked, the service account's
  groups: serviceaccount.MakeGroupNames);
- groups (core group), each;
- uids (authentication.k8s.io), userextras/KEY (authentication.k8s.io), each value;

groups, uid or extra without a user is an error (500, as the filter answers it); without
groups asked, the impersonated user gets system:authenticated. Extra keys are unescaped and
lower-cased (the header name is percent-encoded by client-go).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import unquote

from . import errors
from .auth import Attributes, Policy

USER, UID, GROUP, EXTRA = ("Impersonate-User", "Impersonate-Uid", "Impersonate-Group",
                           "Impersonate-Extra-")
AUTHENTICATED = "system:authenticated"


@dataclass(frozen=True)
class UserInfo:
    name: str
    groups: tuple[str, ...] = (AUTHENTICATED,)
    uid: str = ""
    extra: dict = field(default_factory=dict)
    acting_for: str | None = None  # the authenticated caller, when impersonating


def _asked(headers, requester: UserInfo) -> list[tuple[Attributes, str, str]]:
    """(the `impersonate` check, what is asked, its value) for each header."""
    out = []

    def check(resource: str, name: str, group: str = "", namespace: str = "",
              sub: str = "") -> Attributes:
        return Attributes(requester.name, "impersonate", group, resource, sub, namespace, name,
                          requester.groups)

    user = headers.get(USER)
    if user:
        parts = user.split(":")
        if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"]:
            out.append((check("serviceaccounts", parts[3], namespace=parts[2]), "sa", user))
        else:
            out.append((check("users", user), "user", user))
    for group in headers.get_all(GROUP) or []:
        out.append((check("groups", group), "group", group))
    uid = headers.get(UID)
    if uid:
        out.append((check("uids", uid, "authentication.k8s.io"), "uid", uid))
    for name, value in headers.items():
        if name.lower().startswith(EXTRA.lower()):
            key = unquote(name[len(EXTRA):]).lower()
            out.append((check("userextras", value, "authentication.k8s.io", sub=key),
                        f"extra:{key}", value))
    return out


def impersonate(policy: Policy, requester: UserInfo, headers) -> UserInfo:
    """The user the request runs as; ApiError 403 naming what the caller may not
    impersonate, or 500 for groups/uid/extra without a user."""
    asked = _asked(headers, requester)
    if not asked:
        return requester
    if not any(kind in ("user", "sa") for _, kind, _ in asked):
        raise errors.internal(f"requested {[v for _, _, v in asked]} without impersonating "
                              "a user")
    name, uid = "", ""
    groups: list[str] = []
    extra: dict[str, list[str]] = {}
    groups_given = any(kind == "group" for _, kind, _ in asked)
    for attrs, kind, value in asked:
        policy.check(attrs)
        if kind in ("user", "sa"):
            name = value
            if kind == "sa" and not groups_given:
                ns = value.split(":")[2]
                groups = ["system:serviceaccounts", f"system:serviceaccounts:{ns}", *groups]
        elif kind == "group":
            groups.append(value)
        elif kind == "uid":
            uid = value
        else:
            extra.setdefault(kind[len("extra:"):], []).append(value)
    if not groups_given and name != "system:anonymous" and AUTHENTICATED not in groups:
        groups.append(AUTHENTICATED)
    return UserInfo(name, tuple(groups), uid, extra, acting_for=requester.name)
