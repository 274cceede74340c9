"""The test API server's RBAC authorizer (kubesim/rbac.py), through HTTP as a client sees it:
rules from Roles and ClusterRoles reached through bindings, for tokens and impersonation,
with the admin (system:masters) all-powerful and SelfSubjectAccessReview answering from the
same rules."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from kubesim.server import KubeAPIServer

RBAC = "rbac.authorization.k8s.io/v1"


@pytest.fixture
def srv():
    with KubeAPIServer(controllers=False, rbac=True) as s:
        s.add_node("gpu-node-0", gpus=8)
        s.add_node("gpu-node-1", gpus=8)
        s.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
        yield s


def _call(srv, method, path, token, body=None, headers=None):
    req = urllib.request.Request(srv.url + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": f"Bearer {token}",
                                          "Content-Type": "application/merge-patch+json"
                                          if method == "PATCH" else "application/json",
                                          **(headers or {})})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def _role(kind, name, rules, namespace=None):
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": RBAC, "kind": kind, "metadata": meta, "rules": rules}


def _binding(kind, name, role_kind, role, subjects, namespace=None):
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": RBAC, "kind": kind, "metadata": meta, "subjects": subjects,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind,
                        "name": role}}


def test_without_a_binding_a_user_may_do_nothing_and_the_admin_everything(srv):
    srv.add_token("alice-token", "alice")
    code, body = _call(srv, "GET", "/api/v1/namespaces/default/pods", "alice-token")
    assert code == 403
    assert body["message"] == ('pods is forbidden: User "alice" cannot list resource "pods" '
                               'in API group "" in the namespace "default"')
    assert _call(srv, "GET", "/api/v1/namespaces/default/pods", srv.token)[0] == 200
    assert _call(srv, "DELETE", "/api/v1/nodes/gpu-node-1", srv.token)[0] == 200


def test_a_role_binding_grants_its_namespace_only(srv):
    srv.add_token("alice-token", "alice")
    srv.create(_role("Role", "reader", [{"apiGroups": [""], "resources": ["pods"],
                                         "verbs": ["get", "list"]}], "team"))
    srv.create(_binding("RoleBinding", "alice-reads", "Role", "reader",
                        [{"kind": "User", "name": "alice"}], "team"))
    assert _call(srv, "GET", "/api/v1/namespaces/team/pods", "alice-token")[0] == 200
    assert _call(srv, "GET", "/api/v1/namespaces/default/pods", "alice-token")[0] == 403
    assert _call(srv, "GET", "/api/v1/pods", "alice-token")[0] == 403  # all namespaces
    assert _call(srv, "POST", "/api/v1/namespaces/team/pods", "alice-token", {})[0] == 403


def test_a_cluster_role_bound_in_a_namespace_grants_there_only(srv):
    srv.add_token("t", "bob", ("ml-team",))
    srv.create(_role("ClusterRole", "pod-reader", [{"apiGroups": [""], "resources": ["pods"],
                                                    "verbs": ["list"]}]))
    srv.create(_binding("RoleBinding", "team-reads", "ClusterRole", "pod-reader",
                        [{"kind": "Group", "name": "ml-team"}], "team"))
    assert _call(srv, "GET", "/api/v1/namespaces/team/pods", "t")[0] == 200
    assert _call(srv, "GET", "/api/v1/namespaces/default/pods", "t")[0] == 403


def test_resource_names_subresources_and_groups_narrow_a_rule(srv):
    token = srv.service_account_token("kube-system", "agent")
    srv.create(_role("ClusterRole", "own-node", [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"],
         "resourceNames": ["gpu-node-0"]},
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["get"]},
        {"apiGroups": ["batch"], "resources": ["*"], "verbs": ["list"]}]))
    srv.create(_binding("ClusterRoleBinding", "agent", "ClusterRole", "own-node", [
        {"kind": "ServiceAccount", "name": "agent", "namespace": "kube-system"}]))
    patch = {"metadata": {"labels": {"x": "y"}}}
    assert _call(srv, "PATCH", "/api/v1/nodes/gpu-node-0", token, patch)[0] == 200
    assert _call(srv, "PATCH", "/api/v1/nodes/gpu-node-1", token, patch)[0] == 403
    assert _call(srv, "GET", "/api/v1/nodes/gpu-node-0/status", token)[0] == 200
    assert _call(srv, "GET", "/api/v1/nodes/gpu-node-0", token)[0] == 403
    assert _call(srv, "GET", "/apis/batch/v1/jobs", token)[0] == 200
    assert _call(srv, "GET", "/apis/apps/v1/deployments", token)[0] == 403


def test_a_service_account_subject_needs_its_namespace(srv):
    token = srv.service_account_token("team", "runner")
    srv.create(_role("Role", "r", [{"apiGroups": [""], "resources": ["pods"],
                                    "verbs": ["list"]}], "team"))
    # no namespace on the subject: the binding's (rule.go appliesTo)
    srv.create(_binding("RoleBinding", "b", "Role", "r",
                        [{"kind": "ServiceAccount", "name": "runner"}], "team"))
    assert _call(srv, "GET", "/api/v1/namespaces/team/pods", token)[0] == 200
    other = srv.service_account_token("default", "runner")
    assert _call(srv, "GET", "/api/v1/namespaces/team/pods", other)[0] == 403


def test_impersonated_users_get_their_own_rules_and_self_access_reviews_agree(srv):
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
              "spec": {"resourceAttributes": {"verb": "create", "resource": "pods",
                                              "namespace": "team"}}}
    path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    as_alice = {"Impersonate-User": "alice"}
    code, body = _call(srv, "POST", path, srv.token, review, as_alice)
    assert code == 201 and body["status"] == {"allowed": False}  # RBAC gives no reason
    assert _call(srv, "POST", "/api/v1/namespaces/team/pods", srv.token, {}, as_alice)[0] == 403
    srv.create(_role("Role", "maker", [{"apiGroups": [""], "resources": ["pods"],
                                        "verbs": ["create"]}], "team"))
    srv.create(_binding("RoleBinding", "alice-makes", "Role", "maker",
                        [{"kind": "User", "name": "alice"}], "team"))
    assert _call(srv, "POST", path, srv.token, review, as_alice)[1]["status"] == {
        "allowed": True,
        "reason": 'RBAC: allowed by RoleBinding "alice-makes" of Role "maker" to User "alice"'}
    # the admin's own review: all-powerful
    assert _call(srv, "POST", path, srv.token, review)[1]["status"]["allowed"] is True
    # alice may not impersonate anyone
    srv.add_token("alice-token", "alice")
    assert _call(srv, "GET", "/api/v1/nodes", "alice-token", None,
                 {"Impersonate-User": "kubernetes-admin"})[0] == 403


def test_without_rbac_the_server_allows_what_tests_do_not_forbid():
    with KubeAPIServer(controllers=False) as s:
        s.add_token("t", "anyone")
        assert _call(s, "GET", "/api/v1/nodes", "t")[0] == 200
