"""Every pod template hvdk8s renders or installs, in every mode (built-in pods, elastic,
operator MPIJob, Trainer TrainJob with `install runtime`'s ClusterTrainingRuntime, and
`install agent`), mounts no ServiceAccount token and has no privilege, host path, host
namespace or capability beyond what an option asked for. docs/pod-security.md carries the
table this builds (regenerate: HVDK8S_WRITE_DOCS=1)."""

from __future__ import annotations

import os

import pytest

from kubesim import trainer as trainer_model
from launcher.backends.kubernetes.rendering import render
from mpijob.jobspec.spec import build_spec
from mpijob.k8s import agent_manifests as am
from mpijob.k8s import render_trainjob as tj
from mpijob.k8s.pod_audit import API_AUDIENCES, TABLE_HEAD, PodRights, audit
from mpijob.k8s.trainer_progress import StatusEndpoint
from tests.paths import ROOT
from tests.render_cases import FIXED_KEYS

BASE = dict(name="sec", workers=2, gpus_per_worker=1, command=("python", "t.py"))
# (label, mode, spec fields, what the options asked for)
CASES = [
    ("default", {}, set()),
    ("`--service-account trainer`", {"service_account": "trainer"}, {"token"}),
    ("`--data-dir /mnt/scratch:/scratch`",
     {"data_dirs": ({"path": "/mnt/scratch", "mount": "/scratch"},)}, {"host path"}),
    ("`--host-network`", {"host_network": True}, {"host network"}),
    ("elastic `--min-workers 1 --max-workers 3`", {"min_workers": 1, "max_workers": 3}, set()),
]
MODES = ("pods", "operator", "trainjob")
# Trainer's TrainJobStatus gate on: the TrainJob's launcher gets a token for its endpoint.
TRAINER_STATUS = "Trainer's `TrainJobStatus` on"


def _objects(mode: str, fields: dict, trainer_status: StatusEndpoint | None = None
             ) -> list[dict] | None:
    spec = build_spec(**{**BASE, **fields})
    if mode == "trainjob" and tj.refusal(spec) is not None:
        return None  # refused in one line before anything renders
    try:
        objects = render(spec, mode=mode, ssh=FIXED_KEYS if mode == "pods" else None,
                         elastic_source="print(1)\n" if fields.get("max_workers") else None,
                         trainer_status=trainer_status)
    except Exception as exc:  # a mode that cannot carry the option refuses it
        if type(exc).__name__ == "SpecError":
            return None
        raise
    if mode != "trainjob":
        return objects
    # What Trainer makes of the TrainJob on the installed runtime: the JobSet's pods.
    runtime = tj.horovod_runtime(spec)
    trainjob = next(o for o in objects if o["kind"] == "TrainJob")
    trainjob = {**trainjob, "metadata": {**trainjob["metadata"], "uid": "uid-1"}}
    # with the gate on, Trainer gives the node pods a token of that audience too
    jobset = trainer_model.jobset(trainjob, runtime, None,
                                  trainer_status.base_url if trainer_status else None)
    return [runtime, jobset, *(o for o in objects if o["kind"] != "TrainJob")]


def _allowed(p: PodRights, asked: set[str]) -> list[str]:
    wrong = []
    if p.token and "token" not in asked:
        wrong.append("a ServiceAccount token")
    if p.privileged:
        wrong.append("privileged")
    if p.host_paths and "host path" not in asked:
        wrong.append(f"host paths {p.host_paths}")
    if p.host_namespaces and "host network" not in asked:
        wrong.append(f"host namespaces {p.host_namespaces}")
    if set(p.capabilities) - asked:
        wrong.append(f"capabilities {p.capabilities}")
    return wrong


def _rows() -> list[tuple[str, PodRights, set[str]]]:
    rows = []
    for mode in MODES:
        for label, fields, asked in CASES:
            objects = _objects(mode, fields)
            if objects is None:
                continue
            for p in audit(objects):
                rows.append((f"{mode}, {label}: {p.where}", p, asked))
    for p in audit(_objects("trainjob", {}, StatusEndpoint()) or []):
        rows.append((f"trainjob, {TRAINER_STATUS}: {p.where}", p, set()))
    agent = am.agent_manifests(image="x:1")
    # What the agent is for: both talk to the API (their token); the DaemonSet reads the
    # kubelet's pod-resources socket (its host path, read-only). The guard needs no path.
    needs = {am.AGENT_NAME: {"token", "host path"}, am.GUARD_NAME: {"token"}}
    for p in audit(agent):
        name = p.where.split("/")[1].split(":")[0]
        rows.append((f"`install agent`: {p.where}", p, needs[name]))
    return rows


def test_no_pod_template_has_more_than_its_options_asked_for():
    problems = [f"{label}: {', '.join(wrong)}" for label, p, asked in _rows()
                if (wrong := _allowed(p, asked))]
    assert problems == []


def test_every_mode_and_install_command_is_covered():
    labels = " ".join(label for label, _, _ in _rows())
    for needle in ("pods, default: Job/sec-launcher", "operator, default: MPIJob/sec",
                   "trainjob, default: ClusterTrainingRuntime/", "trainjob, default: JobSet/sec",
                   f"trainjob, {TRAINER_STATUS}: JobSet/sec",
                   "`install agent`: DaemonSet/hvdk8s-agent",
                   "`install agent`: Deployment/hvdk8s-start-guard"):
        assert needle in labels, needle


def test_trainer_pods_carried_a_token_before_the_runtime_said_no():
    """The runtime's pod specs set automountServiceAccountToken: false (a TrainJob's patch
    cannot): without it every Trainer-mode pod got the namespace's default token."""
    runtime = tj.horovod_runtime(build_spec(**BASE))
    rights = audit([runtime])
    assert len(rights) == 2 and not any(p.token for p in rights)


def test_the_launchers_trainer_token_is_not_for_the_api_server():
    """The launcher's projected token (Trainer's status endpoint) is for the TrainJob's
    audience, which the API server does not take: the pod still holds no API credential."""
    objects = _objects("trainjob", {}, StatusEndpoint())
    assert objects is not None
    launcher = [p for p in audit(objects) if "JobSet/" in p.where and "[launcher]" in p.where]
    assert len(launcher) == 1
    (p,) = launcher
    assert p.other_audiences == (
        "trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/sec/status",)
    assert not p.token and not set(p.other_audiences) & set(API_AUDIENCES)
    # without the gate, nothing is projected
    assert not any(p.other_audiences for p in audit(_objects("trainjob", {}) or []))


def test_the_pod_security_doc_lists_every_pod_template():
    table = "\n".join([TABLE_HEAD, *(p.row(label) for label, p, _ in _rows())]) + "\n"
    doc = ROOT / "docs" / "pod-security.md"
    text = doc.read_text()
    begin, end = "<!-- pod-rights:begin -->\n", "<!-- pod-rights:end -->"
    if os.environ.get("HVDK8S_WRITE_DOCS"):
        head, rest = text.split(begin)
        doc.write_text(head + begin + table + end + rest.split(end, 1)[1])
        text = doc.read_text()
    assert text.split(begin)[1].split(end)[0] == table


@pytest.mark.parametrize("mode", MODES)
def test_the_service_account_option_is_the_only_way_to_a_token(mode):
    objects = _objects(mode, {"service_account": "trainer"})
    assert objects is not None
    tokens = {p.token for p in audit(objects)}
    # Trainer's runtime patch cannot mount one: the pods run as the account, tokenless.
    assert tokens == ({False} if mode == "trainjob" else {True})


FORWARDING = ("AllowTcpForwarding", "AllowStreamLocalForwarding", "AllowAgentForwarding",
              "PermitTunnel", "X11Forwarding")


@pytest.mark.parametrize("mode", MODES)
def test_worker_sshd_forwards_nothing(mode):
    """The job's key logs into every worker; a worker's sshd that forwarded TCP would let
    it open tunnels from inside the cluster network. mpirun's daemons connect directly."""
    import json

    text = json.dumps(_objects(mode, {}))
    if mode == "pods":  # worker.sh writes an sshd_config
        assert all(f"{option} no" in text for option in FORWARDING)
    else:  # the operator's and Trainer's workers run sshd with -o options
        assert all(f"-o {option}=no" in text for option in FORWARDING)
