"""One definition of a job's phases (mpijob.phases), read the same by every record."""

from launcher.backends.base import TERMINAL, JobStatus
from launcher.experiments import results
from mpijob.phases import JobPhase


def test_only_succeeded_and_failed_are_terminal():
    assert {p for p in JobPhase if p.terminal} == {JobPhase.SUCCEEDED, JobPhase.FAILED}
    assert set(TERMINAL) == {"Succeeded", "Failed"}


def test_a_phase_no_backend_writes_reads_as_unknown_and_not_done():
    assert JobPhase.of("Evicted") is JobPhase.UNKNOWN and JobPhase.of(None) is JobPhase.UNKNOWN
    status = JobStatus(name="j", namespace="default", backend="local", phase="Evicted")
    assert not status.done
    assert JobStatus(name="j", namespace="default", backend="local", phase="Failed").done


def test_experiment_records_use_the_same_strings():
    assert results.SUCCEEDED == JobPhase.SUCCEEDED.value
    assert results.FAILED == JobPhase.FAILED.value
