"""What every oracle test of placement checks first."""

from mpijob.scheduling.placement import Placement, PlacementRequest, place


def place_checked(cluster, workers: int, g: int, *, feasible: bool) -> Placement | None:
    """place() of `workers` workers of `g` GPUs, infeasible exactly when the oracle says so
    and otherwise placing every worker: the placement, None when infeasible."""
    result = place(cluster, PlacementRequest(workers=workers, gpus_per_worker=g))
    if not feasible:
        assert not result.feasible
        return None
    assert result.feasible, result.reason
    assert sum(a.workers for a in result.assignments) == workers
    return result
