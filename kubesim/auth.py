"""Bearer-token authentication and the authorizer: a deny-list tests set, in front of either
AlwaysAllow (the default, kube-apiserver's --authorization-mode=AlwaysAllow) or RBAC
(rbac.py), producing real 403 texts."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from . import errors


@dataclass(frozen=True)
class Attributes:
    """authorizer.Attributes for a resource request."""

    user: str
    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    groups: tuple[str, ...] = ()  # the user's groups (an impersonated user's, when so)
    acting_for: str | None = None  # the authenticated caller of an impersonated request


@dataclass(frozen=True)
class Rule:
    verb: str
    resource: str  # plural, "plural/subresource", "plural.group" or "*"
    namespace: str | None
    user: str | None
    group: str | None = None  # a group the user is in

    def matches(self, a: Attributes) -> bool:
        if self.verb not in ("*", a.verb):
            return False
        if self.namespace is not None and self.namespace != a.namespace:
            return False
        if self.user is not None and self.user != a.user:
            return False
        if self.group is not None and self.group not in a.groups:
            return False
        res, _, sub = self.resource.partition("/")
        plural, _, group = res.partition(".")
        if res != "*" and plural != a.resource:
            return False
        if group and group != a.group:
            return False
        return sub == a.subresource if sub else True


class Policy:
    """Everything is allowed except what a test forbids; `hook` can decide dynamically."""

    def __init__(self):
        self._rules: list[Rule] = []
        self._lock = threading.Lock()
        self.hook = None  # optional callable(Attributes) -> bool (True means deny)
        self.rbac = None  # an rbac.RBACAuthorizer: then what no rule allows is denied

    def forbid(self, verb: str, resource: str, namespace: str | None = None,
               user: str | None = None, group: str | None = None) -> Rule:
        rule = Rule(verb, resource, namespace, user, group)
        with self._lock:
            self._rules.append(rule)
        return rule

    def allow(self, verb: str, resource: str, namespace: str | None = None,
              user: str | None = None) -> None:
        with self._lock:
            self._rules = [r for r in self._rules if r != Rule(verb, resource, namespace, user)]

    def clear(self) -> None:
        with self._lock:
            self._rules = []
        self.hook = None

    def check(self, a: Attributes) -> None:
        with self._lock:
            denied = any(r.matches(a) for r in self._rules)
        if not denied and self.hook is not None:
            denied = bool(self.hook(a))
        if not denied and self.rbac is not None:
            denied = not self.rbac.allows(a)
        if denied:
            raise errors.forbidden(a.group, a.resource, a.name or None, forbidden_message(a))


def forbidden_message(a: Attributes) -> str:
    """forbiddenMessage() from apiserver's responsewriters."""
    resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    if a.namespace:
        scope = f'in the namespace "{a.namespace}"'
    else:
        scope = "at the cluster scope"
    return (f'User "{a.user}" cannot {a.verb} resource "{resource}" in API group "{a.group}" '
            f"{scope}")


class Tokens:
    def __init__(self):
        self._tokens: dict[str, str] = {}
        self._groups: dict[str, tuple[str, ...]] = {}
        self._extra: dict[str, dict[str, list[str]]] = {}
        self._lock = threading.Lock()

    def add(self, token: str, user: str, groups: tuple[str, ...] = (),
            extra: dict[str, list[str]] | None = None) -> None:
        """A token of `user`; `groups` and `extra` as the token authenticator reports them
        (no groups: only system:authenticated, as every authenticated user)."""
        with self._lock:
            self._tokens[token] = user
            if groups:
                self._groups[token] = tuple(groups)
            if extra:
                self._extra[token] = {k: list(v) for k, v in extra.items()}

    def extra(self, header: str | None) -> dict[str, list[str]]:
        """The user's extra of the (already authenticated) bearer token."""
        if header and header.lower().startswith("bearer "):
            return dict(self._extra.get(header[7:].strip(), {}))
        return {}

    def groups(self, header: str | None) -> tuple[str, ...] | None:
        """The groups of the (already authenticated) bearer token, None when it names none."""
        if header and header.lower().startswith("bearer "):
            return self._groups.get(header[7:].strip())
        return None

    def revoke(self, token: str) -> None:
        with self._lock:
            self._tokens.pop(token, None)
            self._groups.pop(token, None)
            self._extra.pop(token, None)

    def authenticate(self, header: str | None) -> str:
        if header and header.lower().startswith("bearer "):
            user = self._tokens.get(header[7:].strip())
            if user:
                return user
        raise errors.unauthorized()
