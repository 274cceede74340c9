"""ValidatingAdmissionPolicy evaluation in the test API server (kubesim/admission_policy.py),
through HTTP as a client sees it: the topology agent's identity, exactly as `hvdk8s install
agent` creates it (RBAC role plus the own-node policy), and a generic namespaced policy."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from kubesim.server import KubeAPIServer
from mpijob.k8s import agent_manifests as am

NS = "kube-system"
ADMISSION = "admissionregistration.k8s.io/v1"


def _call(srv, method, path, token, body=None, ctype="application/merge-patch+json"):
    req = urllib.request.Request(srv.url + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": f"Bearer {token}",
                                          "Content-Type": ctype if method == "PATCH"
                                          else "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read() or b"{}"), r.headers.get_all("Warning") or []
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}"), []


def _install(srv, manifests):
    for obj in manifests:
        srv.create(obj, obj["metadata"].get("namespace"))


def _agent_pod(srv, node: str, name: str = "hvdk8s-agent-x1") -> str:
    srv.create({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": NS},
                "spec": {"serviceAccountName": am.AGENT_NAME, "nodeName": node,
                         "containers": [{"name": "agent", "image": "agent:1"}]}})
    return name


@pytest.fixture
def srv():
    with KubeAPIServer(controllers=False, rbac=True) as s:
        s.add_node("gpu-node-0", gpus=8)
        s.add_node("gpu-node-1", gpus=8)
        yield s


@pytest.fixture
def agent(srv):
    """The agent's projected token in its pod on gpu-node-0, with the manifests installed."""
    _install(srv, am.agent_manifests(image="agent:1", namespace=NS))
    return srv.service_account_token(NS, am.AGENT_NAME, pod=_agent_pod(srv, "gpu-node-0"))


def _denied(node: str, message: str) -> str:
    return (f'nodes "{node}" is forbidden: ValidatingAdmissionPolicy '
            f"'{am.OWN_NODE_POLICY}' with binding '{am.OWN_NODE_POLICY}' denied request: "
            f"{message}")


OTHER_NODE = "the hvdk8s agent may change only the Node it runs on"
ANNOTATIONS_ONLY = "the hvdk8s agent may change only its Node's annotations"


def test_a_pods_token_names_its_node_and_pod(srv, agent):
    extra = srv.tokens.extra(f"Bearer {agent}")
    pod = srv.get("Pod", "hvdk8s-agent-x1", NS)
    assert extra["authentication.kubernetes.io/node-name"] == ["gpu-node-0"]
    assert extra["authentication.kubernetes.io/node-uid"] == [
        srv.get("Node", "gpu-node-0", "")["metadata"]["uid"]]
    assert extra["authentication.kubernetes.io/pod-uid"] == [pod["metadata"]["uid"]]
    with pytest.raises(ValueError, match="runs as ServiceAccount"):
        srv.service_account_token(NS, am.GUARD_NAME, pod="hvdk8s-agent-x1")


def test_the_agent_annotates_its_own_node(srv, agent):
    code, body, _ = _call(srv, "PATCH", "/api/v1/nodes/gpu-node-0", agent,
                          {"metadata": {"annotations": {"hvdk8s.io/topology": "nvlink"}}})
    assert code == 200, body
    assert srv.get("Node", "gpu-node-0", "")["metadata"]["annotations"][
        "hvdk8s.io/topology"] == "nvlink"


@pytest.mark.parametrize("patch", [
    {"metadata": {"labels": {"nvidia.com/gpu.present": "false"}}},
    {"spec": {"taints": [{"key": "hvdk8s.io/drain", "effect": "NoSchedule"}]}},
    {"spec": {"unschedulable": True}},
], ids=["label", "taint", "cordon"])
def test_the_agent_may_not_label_taint_or_cordon_its_own_node(srv, agent, patch):
    code, body, _ = _call(srv, "PATCH", "/api/v1/nodes/gpu-node-0", agent, patch)
    assert (code, body["reason"]) == (422, "Invalid")
    assert body["message"] == _denied("gpu-node-0", ANNOTATIONS_ONLY)
    assert body["details"]["causes"] == [{"message": body["message"][len(
        'nodes "gpu-node-0" is forbidden: '):]}]
    node = srv.get("Node", "gpu-node-0", "")
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "gpu-node-0"
    assert "nvidia.com/gpu.present" not in node["metadata"]["labels"]
    assert not node["spec"].get("taints") and not node["spec"].get("unschedulable")


def test_the_agent_may_change_nothing_of_another_node(srv, agent):
    for patch in ({"metadata": {"annotations": {"hvdk8s.io/topology": "forged"}}},
                  {"metadata": {"labels": {"x": "y"}}}):
        code, body, _ = _call(srv, "PATCH", "/api/v1/nodes/gpu-node-1", agent, patch)
        assert (code, body["message"]) == (422, _denied("gpu-node-1", OTHER_NODE))
    node = srv.get("Node", "gpu-node-1", "")
    assert "hvdk8s.io/topology" not in node["metadata"]["annotations"]
    # a whole-object PUT is the verb update, which the role does not grant
    code, body, _ = _call(srv, "PUT", "/api/v1/nodes/gpu-node-1", agent, node)
    assert code == 403 and 'cannot update resource "nodes"' in body["message"]
    # and its status subresource is not in the role at all: RBAC refuses before admission
    code, body, _ = _call(srv, "PATCH", "/api/v1/nodes/gpu-node-0/status", agent,
                          {"status": {"capacity": {"nvidia.com/gpu": "16"}}})
    assert code == 403 and "cannot patch resource \"nodes/status\"" in body["message"]


def test_a_token_that_names_no_node_changes_no_node(srv, agent):
    unbound = srv.service_account_token(NS, am.AGENT_NAME)  # a legacy token: no pod, no node
    code, body, _ = _call(srv, "PATCH", "/api/v1/nodes/gpu-node-0", unbound,
                          {"metadata": {"annotations": {"a": "b"}}})
    assert (code, body["message"]) == (422, _denied("gpu-node-0", OTHER_NODE))


def test_without_the_policy_the_role_alone_would_let_the_agent_patch_any_node(srv):
    """What the manifests' policy is for: drop it and the same token edits another node.
    (If agent_manifests stops rendering the policy, the refusals above fail.)"""
    manifests = am.agent_manifests(image="agent:1", namespace=NS)
    assert {m["kind"] for m in manifests} >= {"ValidatingAdmissionPolicy",
                                              "ValidatingAdmissionPolicyBinding"}
    _install(srv, [m for m in manifests if not m["kind"].startswith("ValidatingAdmission")])
    token = srv.service_account_token(NS, am.AGENT_NAME, pod=_agent_pod(srv, "gpu-node-0"))
    code, _, _ = _call(srv, "PATCH", "/api/v1/nodes/gpu-node-1", token,
                       {"metadata": {"labels": {"x": "y"}}})
    assert code == 200


def test_the_agents_policy_leaves_others_alone(srv, agent):
    code, _, _ = _call(srv, "PATCH", "/api/v1/nodes/gpu-node-1", srv.token,
                       {"metadata": {"labels": {"x": "y"}}})
    assert code == 200


# -- a generic policy ----------------------------------------------------------------------


def _policy(name, validations, **spec):
    return {"apiVersion": ADMISSION, "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {"matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                "resources": ["configmaps"]}]}, "validations": validations, **spec}}


def _binding(name, policy, actions=("Deny",), **spec):
    return {"apiVersion": ADMISSION, "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": policy, "validationActions": list(actions), **spec}}


def _configmap(name, data, labels=None):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, **({"labels": labels} if labels else {})}, "data": data}


def test_a_policy_bound_to_one_namespace_denies_there_only(srv):
    for ns in ("team", "other"):
        srv.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    srv.create(_policy("small-configs", [
        {"expression": "size(object.data) <= 2"},
        {"expression": "object.data.all(k, !k.startsWith('secret'))",
         "messageExpression": "'key ' + object.data.filter(k, k.startsWith('secret'))[0] + "
                              "' of ' + object.metadata.name + ' looks like a secret'",
         "reason": "Forbidden"}]))
    srv.create(_binding("small-configs-team", "small-configs", matchResources={
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team"}}}))
    path = "/api/v1/namespaces/{}/configmaps"
    big = _configmap("big", {"a": "1", "b": "2", "c": "3"})
    code, body, _ = _call(srv, "POST", path.format("team"), srv.token, big)
    assert (code, body["reason"]) == (422, "Invalid")
    assert body["message"] == (
        'configmaps "big" is forbidden: ValidatingAdmissionPolicy \'small-configs\' with '
        "binding 'small-configs-team' denied request: failed expression: "
        "size(object.data) <= 2")
    assert _call(srv, "POST", path.format("other"), srv.token, big)[0] == 201
    code, body, _ = _call(srv, "POST", path.format("team"), srv.token,
                          _configmap("db", {"secretPassword": "x"}))
    assert (code, body["reason"]) == (403, "Forbidden")
    assert body["message"].endswith("denied request: key secretPassword of db looks like a "
                                    "secret")
    assert _call(srv, "POST", path.format("team"), srv.token, _configmap("ok", {"a": "1"}))[0] \
        == 201
    # an UPDATE is judged too, and the object is left as it was
    code, _, _ = _call(srv, "PATCH", path.format("team") + "/ok", srv.token,
                       {"data": {"b": "2", "c": "3"}})
    assert code == 422 and srv.get("ConfigMap", "ok", "team")["data"] == {"a": "1"}


def test_an_evaluation_error_follows_the_failure_policy(srv):
    srv.create(_policy("needs-owner", [{"expression": "object.metadata.labels.owner != ''"}],
                       failurePolicy="Fail"))
    srv.create(_binding("needs-owner", "needs-owner"))
    code, body, _ = _call(srv, "POST", "/api/v1/namespaces/default/configmaps", srv.token,
                          _configmap("nolabels", {}))
    assert code == 422
    assert body["message"].endswith(
        "denied request: expression 'object.metadata.labels.owner != ''' resulted in error: "
        "no such key: labels")
    srv.delete("ValidatingAdmissionPolicy", "needs-owner", "")
    srv.create(_policy("needs-owner", [{"expression": "object.metadata.labels.owner != ''"}],
                       failurePolicy="Ignore"))
    assert _call(srv, "POST", "/api/v1/namespaces/default/configmaps", srv.token,
                 _configmap("nolabels", {}))[0] == 201


def test_params_and_warn_and_match_conditions(srv):
    srv.create(_configmap("limits", {"maxKeys": "1"}))
    srv.create(_policy("max-keys", [{"expression": "size(object.data) <= int(params.data.maxKeys)",
                                     "message": "too many keys"}],
                       paramKind={"apiVersion": "v1", "kind": "ConfigMap"},
                       matchConditions=[{"name": "not-the-limits",
                                         "expression": "object.metadata.name != 'limits'"}]))
    srv.create(_binding("max-keys", "max-keys", actions=("Warn",), paramRef={
        "name": "limits", "namespace": "default", "parameterNotFoundAction": "Deny"}))
    code, _, warnings = _call(srv, "POST", "/api/v1/namespaces/default/configmaps", srv.token,
                              _configmap("two", {"a": "1", "b": "2"}))
    assert code == 201
    assert warnings == ['299 - "Validation failed for ValidatingAdmissionPolicy \'max-keys\' '
                        'with binding \'max-keys\': too many keys"']
    code, _, warnings = _call(srv, "PATCH", "/api/v1/namespaces/default/configmaps/limits",
                              srv.token, {"data": {"extra": "1"}})
    assert (code, warnings) == (200, [])  # the match condition leaves the params alone
    code, _, warnings = _call(srv, "PATCH", "/api/v1/namespaces/default/configmaps/two",
                              srv.token, {"data": {"c": "3"}})
    assert code == 200 and len(warnings) == 1 and "too many keys" in warnings[0]
    srv.create(_binding("max-keys-missing", "max-keys", paramRef={
        "name": "absent", "namespace": "default", "parameterNotFoundAction": "Deny"}))
    code, body, _ = _call(srv, "POST", "/api/v1/namespaces/default/configmaps", srv.token,
                          _configmap("one", {"a": "1"}))
    assert code == 422 and body["message"].endswith(
        "with binding 'max-keys-missing' denied request: failed to configure binding: no "
        "params found for policy binding with `Deny` parameterNotFoundAction")


def test_the_agents_own_client_publishes_on_its_node_and_nowhere_else(srv, agent, tmp_path):
    """The agent's real Node client (launcher/agent/node_agent.py) with its pod's token."""
    from launcher.agent.node_agent import NodeAnnotation
    from launcher.backends.kubernetes.client import ApiError, connect

    path = srv.write_kubeconfig(tmp_path / "agent.kubeconfig", token=agent, user=am.AGENT_NAME)
    nodes = NodeAnnotation(connect(kubeconfig=path))
    nodes.patch("gpu-node-0", '{"v":1}')
    assert nodes.get("gpu-node-0") == '{"v":1}'
    with pytest.raises(ApiError) as refused:
        nodes.patch("gpu-node-1", '{"v":1}')
    assert str(refused.value) == _denied("gpu-node-1", OTHER_NODE)
    assert nodes.get("gpu-node-1") is None


def test_variables_and_kubernetes_string_functions(srv):
    srv.create(_policy("team-prefix", [
        {"expression": "variables.prefix == variables.team",
         "messageExpression": "'name must start with ' + variables.team.upperAscii() + '-'"},
        {"expression": "variables.broken == 1 || true"},  # CEL's || absorbs an error
        {"expression": "variables.broken == 1"}],
        variables=[{"name": "team", "expression": "object.metadata.namespace.lowerAscii()"},
                   {"name": "prefix", "expression": "object.metadata.name.split('-')[0]"},
                   {"name": "broken", "expression": "object.nope"}]))
    srv.create(_binding("team-prefix", "team-prefix"))
    path = "/api/v1/namespaces/default/configmaps"
    code, body, _ = _call(srv, "POST", path, srv.token, _configmap("ml-conf", {}))
    assert code == 422
    # the first denial's message; the last one fails only through its broken variable
    assert body["message"].endswith("denied request: name must start with DEFAULT-")
    code, body, _ = _call(srv, "POST", path, srv.token, _configmap("default-conf", {}))
    assert code == 422 and body["message"].endswith(
        "denied request: expression 'variables.broken == 1' resulted in error: composited "
        'variable "broken" fails to evaluate: no such key: nope'), body["message"]
