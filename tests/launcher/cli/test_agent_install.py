"""`hvdk8s install agent`: the manifests (validated against Kubernetes' schemas) and applying them."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest
import yaml
from typer.testing import CliRunner

from launcher import __version__
from launcher.cli.app import app
from kubesim.server import KubeAPIServer
from mpijob.errors import SpecError
from mpijob.k8s import agent_manifests as am

VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
VARIANTS = {
    "default": {},
    "non-root": {"non_root": True, "supplemental_group": 988, "runtime_class": "nvidia"},
    "no-priority": {"priority_class": None, "namespace": "gpu-tools", "interval": 15},
}


def by_kind(manifests: list[dict]) -> dict[str, dict]:
    return {m["kind"]: m for m in manifests}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_manifest_validates(version, variant):
    for obj in am.agent_manifests(image="registry.example/hvdk8s-agent:1.2", **VARIANTS[variant]):
        kubernetes_validate.validate(obj, version, strict=True)


def test_cluster_role_is_what_the_annotation_and_the_start_timeout_sweep_need():
    role = by_kind(am.agent_manifests(image="x:1"))["ClusterRole"]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
        # start_guard.sweep_node: no create, no secrets, no cluster-wide writes but these
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "delete"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "patch"]},
        {"apiGroups": ["kubeflow.org"], "resources": ["mpijobs"], "verbs": ["get", "patch"]}]
    assert "aggregationRule" not in role


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
    assert [d["kind"] for d in docs] == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet"]
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
        "daemonset/hvdk8s-agent created",
    ]
    ds = apiserver.get("DaemonSet", "hvdk8s-agent", "kube-system")
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == "reg/agent:1"

    second = runner.invoke(app, ["install", "agent", "--image", "reg/agent:2"])

    assert second.exit_code == 0, second.output
    assert all(line.endswith(" configured") for line in second.stdout.splitlines())
    ds = apiserver.get("DaemonSet", "hvdk8s-agent", "kube-system")
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == "reg/agent:2"
    applies = [r for r in apiserver.request_log if r.method == "PATCH"]
    assert len(applies) == 8  # one server-side apply per object and run, nothing else writes
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
