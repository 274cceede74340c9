"""The RBAC authorizer, modelled on k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac
(rbac.go: RBACAuthorizer.Authorize, RuleAllows; pkg/registry/rbac/validation/rule.go:
VisitRulesFor, appliesTo) with kube-apiserver's privileged-group short cut in front
(pkg/kubeapiserver/authorizer/config.go: authorizerfactory.NewPrivilegedGroups for
system:masters, consulted before any other authorizer).

A request is allowed when a rule reachable from the user allows it:
- every ClusterRoleBinding whose subjects apply to the user contributes its ClusterRole's
  rules, whatever the namespace (cluster-scoped requests see only these);
- for a namespaced request, every RoleBinding of that namespace whose subjects apply
  contributes its Role's (same namespace) or ClusterRole's rules, in that namespace only.

A subject applies (appliesTo): User by name, Group by membership, ServiceAccount when the
user is `system:serviceaccount:NS:NAME` (a RoleBinding's subject without a namespace means
the binding's). A rule allows (RuleAllows) when the verb, the API group, the resource
(`plural`, `plural/sub`, `*`, or `*/sub`) and the name (empty resourceNames: any) match.
A missing role contributes nothing. Aggregated ClusterRoles, non-resource URLs and the
escalation check on writing roles are not modelled.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .auth import Attributes

PRIVILEGED_GROUP = "system:masters"  # user.SystemPrivilegedGroup
GROUP = "rbac.authorization.k8s.io"
ROLES, ROLE_BINDINGS = f"{GROUP}/roles", f"{GROUP}/rolebindings"
CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS = f"{GROUP}/clusterroles", f"{GROUP}/clusterrolebindings"


def service_account_user(namespace: str, name: str) -> str:
    """serviceaccount.MakeUsername."""
    return f"system:serviceaccount:{namespace}:{name}"


def service_account_groups(namespace: str) -> tuple[str, ...]:
    """serviceaccount.MakeGroupNames, plus what every authenticated user has."""
    return ("system:serviceaccounts", f"system:serviceaccounts:{namespace}",
            "system:authenticated")


def applies_to(subject: dict, user: str, groups: Iterable[str], binding_namespace: str) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        return subject.get("name") == user
    if kind == "Group":
        return subject.get("name") in set(groups)
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_namespace
        return bool(ns) and user == service_account_user(ns, subject.get("name") or "")
    return False


def _has(values: list | None, wanted: str) -> bool:
    values = values or []
    return "*" in values or wanted in values


def rule_allows(rule: dict, a: Attributes) -> bool:
    """RuleAllows for a resource request."""
    if not _has(rule.get("verbs"), a.verb) or not _has(rule.get("apiGroups"), a.group):
        return False
    combined = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    resources = rule.get("resources") or []
    if not any(r == "*" or r == combined or (a.subresource and r == f"*/{a.subresource}")
               for r in resources):
        return False
    names = rule.get("resourceNames") or []
    return not names or a.name in names


class RBACAuthorizer:
    def __init__(self, store):
        self.store = store

    def rules_for(self, user: str, groups: Iterable[str], namespace: str
                  ) -> Iterator[tuple[str, dict]]:
        """VisitRulesFor: (where it comes from, rule) for each rule the user holds in
        `namespace` ('': cluster scope)."""
        groups = tuple(groups)
        bindings = [("ClusterRoleBinding", b, "") for b in self.store.items(CLUSTER_ROLE_BINDINGS)]
        if namespace:
            bindings += [("RoleBinding", b, namespace)
                         for b in self.store.items(ROLE_BINDINGS, namespace)]
        for kind, binding, ns in bindings:
            for subject in binding.get("subjects") or []:
                if applies_to(subject, user, groups, ns):
                    ref = binding.get("roleRef") or {}
                    # rbac.go's authorizingVisitor names where an allowed request's rule is
                    source = (f'{kind} "{binding["metadata"]["name"]}"'
                              + (f' of {ref.get("kind")} "{ref.get("name")}"')
                              + f' to {subject.get("kind")} "{subject.get("name")}"')
                    for rule in self._role_rules(ref, ns):
                        yield source, rule
                    break

    def _role_rules(self, ref: dict, namespace: str) -> list[dict]:
        if ref.get("kind") == "ClusterRole":
            role = self.store.get(CLUSTER_ROLES, "", ref.get("name") or "")
        elif ref.get("kind") == "Role" and namespace:
            role = self.store.get(ROLES, namespace, ref.get("name") or "")
        else:
            role = None
        return list((role or {}).get("rules") or [])

    def allows(self, a: Attributes) -> bool:
        return self.reason(a) is not None

    def reason(self, a: Attributes) -> str | None:
        """Why the request is allowed (as SelfSubjectAccessReview's status.reason says it),
        None when it is not: RBAC denies with no reason of its own."""
        if PRIVILEGED_GROUP in a.groups:
            return ""  # the privileged-group authorizer gives none
        for source, rule in self.rules_for(a.user, a.groups, a.namespace):
            if rule_allows(rule, a):
                return f"RBAC: allowed by {source}"
        return None
