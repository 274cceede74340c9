"""`hvdk8s install agent`: the manifests (validated against Kubernetes' schemas) and applying them."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest
import yaml
from typer.testing import CliRunner

from kubesim.server import KubeAPIServer
from launcher import __version__
from launcher.cli.app import app
from mpijob.errors import SpecError
from mpijob.k8s import agent_manifests as am

VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
VARIANTS = {
    "default": {},
    "non-root": {"non_root": True, "supplemental_group": 988, "runtime_class": "nvidia"},
    "no-priority": {"priority_class": None, "namespace": "gpu-tools", "interval": 15},
}


def by_kind(manifests: list[dict], name: str = am.AGENT_NAME) -> dict[str, dict]:
    """One identity's objects (the agent's, or the start guard's), by kind."""
    return {m["kind"]: m for m in manifests
            if m["metadata"]["name"] in (name, f"{name}-own-node")}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_manifest_validates(version, variant):
    for obj in am.agent_manifests(image="registry.example/hvdk8s-agent:1.2", **VARIANTS[variant]):
        kubernetes_validate.validate(obj, version, strict=True)


def test_the_per_node_agent_may_only_read_and_patch_nodes():
    role = by_kind(am.agent_manifests(image="x:1"))["ClusterRole"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"],
                              "verbs": ["get", "patch"]}]
    assert "aggregationRule" not in role


def test_the_own_node_policy_binds_the_agents_patches_to_its_tokens_node():
    objs = by_kind(am.agent_manifests(image="x:1", namespace="gpu-tools"))
    policy, binding = objs["ValidatingAdmissionPolicy"], objs["ValidatingAdmissionPolicyBinding"]
    assert binding["spec"] == {"policyName": policy["metadata"]["name"],
                               "validationActions": ["Deny"]}
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConditions"][0]["expression"] == (
        "request.userInfo.username == 'system:serviceaccount:gpu-tools:hvdk8s-agent'")
    [rule] = spec["matchConstraints"]["resourceRules"]
    assert rule["operations"] == ["UPDATE"] and rule["resources"] == ["nodes", "nodes/*"]
    own, fields = (v["expression"] for v in spec["validations"])
    assert "object.metadata.name == request.userInfo.extra[" \
        "'authentication.kubernetes.io/node-name'][0]" in own
    assert "object.spec == oldObject.spec" in fields and "!has(request.subResource)" in fields


def test_the_start_guard_holds_the_sweeps_rights_in_one_deployment_off_the_gpu_nodes():
    objs = by_kind(am.agent_manifests(image="x:1", interval=30), am.GUARD_NAME)
    assert objs["ClusterRole"]["rules"] == am.GUARD_RULES
    assert {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"],
            "verbs": ["get", "patch"]} in am.GUARD_RULES
    deploy = objs["Deployment"]
    pod = deploy["spec"]["template"]["spec"]
    assert deploy["spec"]["replicas"] == 1 and pod["serviceAccountName"] == am.GUARD_NAME
    assert not any("hostPath" in v for v in pod["volumes"])
    assert pod["securityContext"]["runAsNonRoot"] is True
    [container] = pod["containers"]
    assert container["command"] + container["args"] == [
        "hvdk8s", "agent", "--sweep-only", "--interval", "30"]
    daemon = by_kind(am.agent_manifests(image="x:1"))["DaemonSet"]["spec"]["template"]["spec"]
    assert "--sweep-only" not in daemon["containers"][0]["args"]


def test_binding_ties_the_role_to_the_daemonsets_service_account():
    objs = by_kind(am.agent_manifests(image="x:1", namespace="gpu-tools"))
    sa, binding, ds = objs["ServiceAccount"], objs["ClusterRoleBinding"], objs["DaemonSet"]
    assert binding["roleRef"]["name"] == objs["ClusterRole"]["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": "gpu-tools"}
    ]
    assert ds["spec"]["template"]["spec"]["serviceAccountName"] == sa["metadata"]["name"]
    assert sa["metadata"]["namespace"] == ds["metadata"]["namespace"] == "gpu-tools"
    assert "Namespace" not in objs


def test_daemonset_runs_on_gpu_nodes_with_nvml_and_the_kubelet_socket():
    ds = by_kind(am.agent_manifests(image="x:1", interval=30))["DaemonSet"]
    pod = ds["spec"]["template"]["spec"]
    [container] = pod["containers"]

    assert ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert pod["priorityClassName"] == "system-node-critical"
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"]["value"] == "utility"
    # NVML through the runtime: no GPU is requested, so none is taken from jobs.
    assert not any("nvidia.com" in k for part in container["resources"].values() for k in part)
    assert set(container["resources"]["limits"]) == {"cpu", "memory"}
    volumes = {v["name"]: v for v in pod["volumes"]}
    [mount] = [m for m in container["volumeMounts"] if m["mountPath"] == "/var/lib/kubelet/pod-resources"]
    assert mount["readOnly"] is True
    assert volumes[mount["name"]]["hostPath"]["path"] == "/var/lib/kubelet/pod-resources"
    # The agent's own flags: the socket is where the mount puts it.
    args = container["command"] + container["args"]
    assert args[:2] == ["hvdk8s", "agent"]
    assert args[args.index("--interval") + 1] == "30"
    assert args[args.index("--kubelet-socket") + 1].startswith(mount["mountPath"] + "/")
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["readOnlyRootFilesystem"] is True


def test_non_root_variant():
    pod = by_kind(am.agent_manifests(image="x:1", non_root=True, supplemental_group=988))["DaemonSet"]
    security = pod["spec"]["template"]["spec"]["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["runAsUser"] != 0
    assert security["supplementalGroups"] == [988]


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"namespace": "Kube_System"}, "namespace"),
        ({"image": "bad image"}, "image"),
        ({"interval": 0}, "interval"),
        ({"priority_class": "Not/Valid"}, "priority_class"),
    ],
)
def test_bad_inputs_name_the_field(kwargs, field):
    with pytest.raises(SpecError) as err:
        am.agent_manifests(**{"image": "x:1", **kwargs})
    assert err.value.field == field


runner = CliRunner()


def test_cli_dry_run_prints_the_manifests_as_yaml():
    result = runner.invoke(app, ["install", "agent", "--dry-run", "-o", "yaml"])

    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["kind"] for d in docs] == [
        "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding", "DaemonSet",
        "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment"]
    assert docs == am.agent_manifests(image=am.default_image(__version__))
    assert docs[0]["metadata"]["namespace"] == "kube-system"
    for doc in docs:
        kubernetes_validate.validate(doc, VERSIONS[-1], strict=True)


def test_cli_dry_run_json_with_options():
    result = runner.invoke(
        app,
        ["install", "agent", "--dry-run", "-o", "json", "-n", "gpu-tools", "--image", "reg/agent:9",
         "--priority-class", ""],
    )

    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert listed["kind"] == "List"
    ds = by_kind(listed["items"])["DaemonSet"]
    assert ds["metadata"]["namespace"] == "gpu-tools"
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == "reg/agent:9"
    assert "priorityClassName" not in ds["spec"]["template"]["spec"]


@pytest.mark.parametrize(
    "args, option",
    [
        (["-n", "Bad_NS"], "-n/--namespace"),
        (["-o", "table"], "-o/--output"),
        (["--supplemental-group", "5"], "--supplemental-group"),
    ],
)
def test_cli_bad_options_exit_2_naming_the_option(args, option):
    result = runner.invoke(app, ["install", "agent", "--dry-run", *args])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {option}: ")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.fixture
def apiserver(tmp_path, monkeypatch):
    with KubeAPIServer() as server:  # kube-system exists, as in every cluster
        monkeypatch.setenv("KUBECONFIG", server.write_kubeconfig(tmp_path / "kubeconfig"))
        server.clear_requests()
        yield server


def test_cli_applies_then_updates(apiserver):
    first = runner.invoke(app, ["install", "agent", "--image", "reg/agent:1"])

    assert first.exit_code == 0, first.output
    assert first.stdout.splitlines() == [
        "serviceaccount/hvdk8s-agent created",
        "clusterrole/hvdk8s-agent created",
        "clusterrolebinding/hvdk8s-agent created",
        "validatingadmissionpolicy/hvdk8s-agent-own-node created",
        "validatingadmissionpolicybinding/hvdk8s-agent-own-node created",
        "daemonset/hvdk8s-agent created",
        "serviceaccount/hvdk8s-start-guard created",
        "clusterrole/hvdk8s-start-guard created",
        "clusterrolebinding/hvdk8s-start-guard created",
        "deployment/hvdk8s-start-guard created",
    ]
    ds = apiserver.get("DaemonSet", "hvdk8s-agent", "kube-system")
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == "reg/agent:1"

    second = runner.invoke(app, ["install", "agent", "--image", "reg/agent:2"])

    assert second.exit_code == 0, second.output
    assert all(line.endswith(" configured") for line in second.stdout.splitlines())
    ds = apiserver.get("DaemonSet", "hvdk8s-agent", "kube-system")
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == "reg/agent:2"
    applies = [r for r in apiserver.request_log if r.method == "PATCH"]
    assert len(applies) == 20  # one server-side apply per object and run, nothing else writes
    assert {(r.content_type, r.query.get("fieldManager")) for r in applies} == {
        ("application/apply-patch+yaml", "hvdk8s")}


def test_cli_refuses_a_missing_namespace(apiserver):
    result = runner.invoke(app, ["install", "agent", "-n", "gpu-tools", "--image", "reg/agent:1"])

    assert result.exit_code == 2
    assert "namespace 'gpu-tools' does not exist" in result.stderr
    assert [(r.method, r.path) for r in apiserver.request_log] == [
        ("GET", "/api/v1/namespaces/gpu-tools")]


def test_cli_context_picks_the_kubeconfig_context(apiserver, tmp_path, monkeypatch):
    config = yaml.safe_load(open(apiserver.write_kubeconfig(tmp_path / "kubeconfig", context="lab")))
    config["contexts"].append({"name": "elsewhere", "context": {"cluster": "nowhere", "user": "lab-user"}})
    config["clusters"].append({"name": "nowhere", "cluster": {"server": "http://127.0.0.1:9"}})
    config["current-context"] = "elsewhere"
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(config))

    result = runner.invoke(app, ["install", "agent", "--context", "lab", "--image", "reg/agent:1"])
    assert result.exit_code == 0, result.output
    assert apiserver.get("ClusterRole", "hvdk8s-agent") is not None

    missing = runner.invoke(app, ["install", "agent", "--context", "nope", "--image", "reg/agent:1"])
    assert missing.exit_code == 2
    assert missing.stderr.startswith("error: --context 'nope' not found in ")


def test_docs_list_every_permission_of_every_installed_identity():
    from tests.paths import ROOT

    text = (ROOT / "docs" / "agent.md").read_text()
    table = text.split("<!-- permissions:begin -->\n")[1].split("<!-- permissions:end -->")[0]
    assert table == am.permission_table(am.agent_manifests(image="x:1"))
    for name in (am.AGENT_NAME, am.GUARD_NAME):
        assert f"| `{name}` |" in table
