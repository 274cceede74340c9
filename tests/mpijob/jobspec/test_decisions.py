"""The plan's decisions beside the spec, and the one record of both on the root."""

import dataclasses

import pytest

from mpijob.jobspec.decisions import Decisions, asked_of_record, record
from mpijob.jobspec.spec import JobSpec, RdmaRequest, build_spec
from mpijob.jobspec.worker_share import plan_shares


def test_a_job_that_decides_nothing_records_its_spec_as_before():
    spec = build_spec(name="j", workers=2, gpus_per_worker=1)
    assert record(spec, Decisions.undecided(spec)) == spec.model_dump(mode="json")


def test_the_record_holds_what_was_decided_and_reads_back_as_a_spec():
    spec = build_spec(name="j", workers=2, gpus_per_worker=1, host_network=True)
    decided = Decisions(gpu_request="dra", preflight="warn", ssh_port=30001,
                        rdma_request=RdmaRequest(resource="rdma/hca"),
                        worker_shares=plan_shares(None, None, 1))
    data = record(spec, decided)
    assert (data["gpu_request"], data["preflight"], data["ssh_port"]) == ("dra", "warn", 30001)
    assert data["rdma_request"]["resource"] == "rdma/hca" and data["worker_shares"]
    back = JobSpec.model_validate(asked_of_record(data))
    assert (back.ssh_port, back.gpu_request, back.preflight) == (30001, "dra", "warn")
    # the spec itself is untouched by what was decided for it
    assert (spec.gpu_request, spec.preflight, spec.ssh_port) != (back.gpu_request,
                                                                 back.preflight, back.ssh_port)


def test_decisions_are_built_once():
    spec = build_spec(name="j")
    with pytest.raises(dataclasses.FrozenInstanceError):
        Decisions.undecided(spec).ssh_port = 1  # type: ignore[misc]


def test_the_ranks_get_nccls_fabric_settings_only_with_an_rdma_device():
    spec = build_spec(name="j", env={"A": "1"})
    plain = Decisions.undecided(spec).job_env(spec)
    rdma = dataclasses.replace(Decisions.undecided(spec), rdma_request=RdmaRequest(
        resource="rdma/hca", link="roce", hcas=("mlx5_0",))).job_env(spec)
    assert plain["A"] == rdma["A"] == "1"
    assert "NCCL_IB_HCA" not in plain and rdma["NCCL_IB_HCA"] == "mlx5_0"
