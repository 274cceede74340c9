"""The spec is built once and never replaced: every step of the pipeline gets the very
object `build_spec_from_options` returned, and what the plan decides (the GPU request,
the preflight, the RDMA device, the workers' default requests, the sshd port) travels
beside it in `plan.decisions` (mpijob.jobspec.decisions)."""

from __future__ import annotations

import dataclasses

import pytest

from launcher.backends.kubernetes.rendering import KubernetesObjects
from launcher.formats import clusterfile
from launcher.pipeline import submitting
from launcher.pipeline.submitting import JobOptions, SubmitRequest, run_submit
from mpijob.jobspec.ssh_port import derived_ssh_port

RDMA_CLUSTER = """
defaults:
  gpus: 8
  topology: dgx1-v100
  network_gbps: 10
  resources: {rdma/rdma_shared_device_a: 63}
  rdma_link: infiniband
  rdma_hcas: [mlx5_0]
nodes:
  - name: a
  - name: b
"""


def _walk(monkeypatch, tmp_path, values: dict, *, mode: str = "auto", host_ports=()):
    """A client dry run on a cluster file; (the spec built, every spec a step was given,
    the outcome)."""
    path = tmp_path / "cluster.yaml"
    path.write_text(RDMA_CLUSTER)
    load = clusterfile.load_cluster
    monkeypatch.setattr(clusterfile, "load_cluster", lambda p: dataclasses.replace(
        load(p), nodes=tuple(dataclasses.replace(n, host_ports=frozenset(host_ports))
                             for n in load(p).nodes)))
    built, seen = [], []
    real_build = submitting.build_spec_from_options

    def build(*args, **kw):
        built.append(real_build(*args, **kw))
        return built[-1]

    monkeypatch.setattr(submitting, "build_spec_from_options", build)
    for step in ("plan", "start_note", "job_options"):  # steps given the spec
        real = getattr(KubernetesObjects, step)

        def given_spec(self, spec, *args, _real=real, **kw):
            seen.append(spec)
            return _real(self, spec, *args, **kw)

        monkeypatch.setattr(KubernetesObjects, step, given_spec)
    for step in ("preflight", "prepare"):  # steps given the plan
        real = getattr(KubernetesObjects, step)

        def given_plan(self, plan, *args, _real=real, **kw):
            seen.append(plan.spec)
            return _real(self, plan, *args, **kw)

        monkeypatch.setattr(KubernetesObjects, step, given_plan)
    outcome = run_submit(SubmitRequest(JobOptions({"name": "once", **values}), mode=mode,
                                       cluster=str(path), dry_run="client"))
    (spec,) = built
    return spec, seen, outcome


def _only(spec, seen, outcome):
    assert len(seen) >= 5 and all(s is spec for s in seen)
    assert outcome.plan.spec is spec


def test_what_the_plan_decides_goes_beside_the_spec(monkeypatch, tmp_path):
    spec, seen, outcome = _walk(monkeypatch, tmp_path, {"workers": 16, "gpus_per_worker": 1})
    _only(spec, seen, outcome)
    decided = outcome.plan.decisions
    # decided here, and the spec still says what was asked (nothing)
    assert decided.rdma_request is not None and decided.preflight == "warn"
    assert decided.worker_shares and decided.gpu_request == "device-plugin"
    assert (spec.preflight, spec.gpu_request, spec.cpu) == (None, "auto", None)
    # what is sent carries the decisions
    workers = [o for o in outcome.objects if o["kind"] == "Pod"]
    assert workers and all("rdma/rdma_shared_device_a" in
                           w["spec"]["containers"][0]["resources"]["requests"] for w in workers)


def test_the_sshd_port_moved_on_the_host_network_is_a_decision(monkeypatch, tmp_path):
    asked = derived_ssh_port("default", "once")
    spec, seen, outcome = _walk(monkeypatch, tmp_path, {"workers": 2, "gpus_per_worker": 8,
                                                        "host_network": True, "rdma": "off"},
                                host_ports=(asked,))
    _only(spec, seen, outcome)
    port = outcome.plan.decisions.ssh_port
    assert spec.ssh_port == asked != port
    (service,) = [o for o in outcome.objects if o["kind"] == "Service"]
    assert service["spec"]["ports"][0]["port"] == port


def test_a_trainjob_plans_from_what_it_carries_and_the_spec_stays_as_asked(monkeypatch,
                                                                           tmp_path):
    spec, seen, outcome = _walk(monkeypatch, tmp_path, {"workers": 16, "gpus_per_worker": 1},
                                mode="trainjob")
    _only(spec, seen, outcome)
    assert spec.rdma == "auto" and outcome.plan.decisions.rdma_request is None
    assert outcome.objects[0]["kind"] == "TrainJob"


def test_a_plan_cannot_be_given_another_spec(monkeypatch, tmp_path):
    _, _, outcome = _walk(monkeypatch, tmp_path, {"workers": 2, "gpus_per_worker": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcome.plan.spec = outcome.plan.spec  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcome.plan.decisions.ssh_port = 1  # type: ignore[misc]
