"""The client dry run, `--dry-run=server` and `submit` agree, object by object.

For each job of the table, against the test API server: the objects the client dry run
prints, those the server's dry run answers and those `submit` leaves in the cluster are
the same set (kind and name), and every field the client dry run shows is what the server
accepted and what was created. The server may add what it defaults (uids, a Job's
selector, container defaults): those are fields the client never sent. What differs by
nature, and is left out, is listed in VOLATILE with the reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def hvdk8s(k8s, *args: str):
    """The CLI as a user runs it: the backend chosen from the kubeconfig (the fixture's
    $KUBECONFIG), not named; a traceback fails the test."""
    from typer.testing import CliRunner

    from launcher.cli.app import app

    result = CliRunner().invoke(app, [*args, "-n", k8s.namespace])
    assert "Traceback" not in result.output, result.output
    return result

# Set at creation, never part of what is sent: identity and bookkeeping the API server
# writes, the ownerReference to the root (its uid exists only once the root does), and the
# submission id hvdk8s tags each create with (launcher.backends.kubernetes.apply).
VOLATILE_META = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields",
                 "ownerReferences", "deletionTimestamp", "deletionGracePeriodSeconds")
SUBMISSION = "hvdk8s.io/submission"


def _setup_plain(srv, tmp):
    srv.add_pvc("data-rwx", ["ReadWriteMany"])


def _patch_file(tmp: Path) -> str:
    path = tmp / "patch.yaml"
    path.write_text("spec:\n  containers:\n  - name: worker\n    env:\n    - name: NCCL_DEBUG\n"
                    "      value: INFO\n")
    return f"worker={path}"


ROWS = {
    # name: (setup, args)
    "one-node-packed": (_setup_plain, ["--workers", "4", "--gpus", "1"]),
    "two-nodes-rwx-claim": (_setup_plain, ["--workers", "16", "--gpus", "1",
                                           "--data", "data-rwx:/data"]),
    "rwo-claim-one-node": (lambda srv, tmp: srv.add_pvc("data-rwo", ["ReadWriteOnce"]),
                           ["--workers", "4", "--gpus", "2", "--data", "data-rwo:/data:ro"]),
    "cpu-workers": (_setup_plain, ["--workers", "2", "--gpus", "0", "--cpu", "2"]),
    "host-network": (lambda srv, tmp: srv.set_pod_security("default", enforce="privileged"), ["--workers", "2", "--gpus", "4", "--host-network"]),
    "worker-patch": (_setup_plain, ["--workers", "2", "--gpus", "2", "--pod-patch", "PATCH"]),
    "volcano": (lambda srv, tmp: srv.install_group("volcano"),
                ["--workers", "4", "--gpus", "2", "--gang-scheduler", "volcano"]),
    "kai": (lambda srv, tmp: (srv.install_kai(), srv.kai_queue("default-queue")),
            ["--workers", "2", "--gpus", "4", "--gang-scheduler", "kai"]),
    "operator": (lambda srv, tmp: srv.install_mpi_operator(),
                 ["--workers", "2", "--gpus", "1", "--mode", "operator"]),
    "operator-kueue": (lambda srv, tmp: (srv.install_mpi_operator(), srv.install_kueue(),
                                         srv.kueue_queue("team", {"nvidia.com/gpu": "16"})),
                       ["--workers", "2", "--gpus", "1", "--mode", "operator",
                        "--gang-scheduler", "kueue", "--queue", "team"]),
    "scheduler-plugins": (lambda srv, tmp: srv.install_group("scheduler-plugins"),
                          ["--workers", "2", "--gpus", "4", "--gang-scheduler",
                           "scheduler-plugins"]),
    "workload-api": (lambda srv, tmp: srv.serve_workload_api(),
                     ["--workers", "2", "--gpus", "8", "--gang-scheduler", "workload-api"]),
}


def _strip(obj: dict) -> dict:
    obj = json.loads(json.dumps(obj))
    meta = obj.get("metadata") or {}
    for k in VOLATILE_META:
        meta.pop(k, None)
    (meta.get("annotations") or {}).pop(SUBMISSION, None)
    if meta.get("annotations") == {}:
        meta.pop("annotations")
    obj.pop("status", None)
    if obj.get("kind") == "Secret":
        # The SSH key pair is made afresh for each run: compare which keys it holds.
        data = {**(obj.pop("data", None) or {}), **(obj.pop("stringData", None) or {})}
        obj["keys"] = sorted(data)
    return obj


def _differences(sent, got, path="") -> list[str]:
    """Where `got` lacks or changes a value that `sent` has (fields `got` adds are the
    server's defaults)."""
    if isinstance(sent, dict) and isinstance(got, dict):
        return [d for k, v in sent.items() for d in _differences(v, got.get(k), f"{path}.{k}")]
    if isinstance(sent, list) and isinstance(got, list) and len(sent) == len(got):
        return [d for i, (a, b) in enumerate(zip(sent, got, strict=True)) for d in
                _differences(a, b, f"{path}[{i}]")]
    return [] if sent == got else [f"{path}: sent {sent!r}, got {got!r}"]


def _key(obj: dict) -> tuple[str, str, str]:
    return obj["apiVersion"], obj["kind"], obj["metadata"]["name"]


def _items(result) -> dict:
    assert result.exit_code == 0, result.output
    return {_key(o): _strip(o) for o in json.loads(result.stdout)["items"]}


def _created(srv, keys) -> dict:
    out = {}
    for api_version, kind, name in keys:
        obj = srv._rt_for({"apiVersion": api_version, "kind": kind})
        found = srv.store.get(obj.key, "default" if obj.namespaced else "", name)
        if found is not None:
            out[(api_version, kind, name)] = _strip({"apiVersion": api_version, "kind": kind,
                                                     **found})
    return out


# A job the scheduler has bound carries the node; a Job hvdk8s released is no longer
# suspended (backend._release_when_scheduled); the start gate's deadline is shortened to
# the time scheduling took plus --start-timeout (start_gate.GatedCreation.arm). Those are
# what submit does after creating.
AFTER_CREATE = {("Pod", ".spec.nodeName"), ("Job", ".spec.suspend"),
                ("Job", ".spec.activeDeadlineSeconds")}


@pytest.mark.parametrize("row", sorted(ROWS))
def test_client_dry_run_server_dry_run_and_submit_agree(k8s, row, tmp_path):
    srv = k8s.server()
    setup, args = ROWS[row]
    setup(srv, tmp_path)
    args = [_patch_file(tmp_path) if a == "PATCH" else a for a in args]
    base = ["submit", "mpi", "--name", "cmp", "--image", k8s.image, *args]

    client = _items(hvdk8s(k8s, *base, "--dry-run", "-o", "json"))
    server = _items(hvdk8s(k8s, *base, "--dry-run=server", "-o", "json"))
    assert srv.objects("pods", "default") == [], "a dry run created pods"
    submitted = hvdk8s(k8s, *base)
    assert submitted.exit_code == 0, submitted.output
    created = _created(srv, client)

    assert sorted(server) == sorted(client)
    assert sorted(created) == sorted(client), "submit created other objects than shown"
    for key, sent in client.items():
        assert _differences(sent, server[key]) == [], (key, "server dry run")
        kept = [d for d in _differences(sent, created[key])
                if (key[1], d.split(":")[0]) not in AFTER_CREATE]
        assert kept == [], (key, "created")


def test_a_refusal_is_the_same_in_all_three(k8s):
    """A ReadWriteOnce claim across two nodes: the client dry run refuses it as submit
    does (it used to pass: the claim went unread), one line, exit 2, nothing created."""
    srv = k8s.server()
    srv.add_pvc("data-rwo", ["ReadWriteOnce"])
    base = ["submit", "mpi", "--name", "rwo", "--image", k8s.image, "--workers", "16",
            "--gpus", "1", "--data", "data-rwo:/data"]
    for extra in (["--dry-run"], ["--dry-run=server"], []):
        result = hvdk8s(k8s, *base, *extra)
        assert result.exit_code == 2, (extra, result.output)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: --data data-rwo"), lines
    assert srv.objects("pods", "default") == [] and srv.objects("jobs", "default") == []


def test_the_client_dry_run_shows_the_start_gates_deadline_as_created(k8s):
    """The gate Job is created with a deadline (all of --schedule-timeout, then
    --start-timeout), which the client dry run shows; once the workers are scheduled submit
    shortens it, never lengthens it."""
    srv = k8s.server()
    base = ["submit", "mpi", "--name", "gd", "--image", k8s.image, "--workers", "2",
            "--gpus", "1", "--start-timeout", "300", "--schedule-timeout", "20"]
    gate_name = "gd-start-gate"
    shown = _items(hvdk8s(k8s, *base, "--dry-run", "-o", "json"))[("batch/v1", "Job", gate_name)]
    assert shown["spec"]["activeDeadlineSeconds"] == 320
    server = _items(hvdk8s(k8s, *base, "--dry-run=server", "-o", "json"))
    assert server[("batch/v1", "Job", gate_name)]["spec"]["activeDeadlineSeconds"] == 320
    assert hvdk8s(k8s, *base).exit_code == 0
    armed = srv.get("jobs", gate_name)["spec"]["activeDeadlineSeconds"]
    assert 300 <= armed <= 320
