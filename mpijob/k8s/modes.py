"""Which mode runs a job on Kubernetes: `--mode auto`'s decision table, and what each mode
cannot carry (README, "Modes: --mode auto").

The table, first row that applies (what is installed x what the job asks):

| job asks                                  | installed                        | auto picks |
|-------------------------------------------|----------------------------------|------------|
| --min/--max-workers (elastic)             | anything                         | pods       |
| nothing the operator cannot carry         | MPI Operator                     | operator   |
| nothing a TrainJob cannot carry           | Trainer + hvdk8s's runtime for   | trainjob   |
|                                           | the job's image                  |            |
| anything else                             | anything                         | pods       |

The MPI Operator cannot carry: elastic jobs; --host-network with Intel MPI/MPICH (Hydra
cannot be told the sshd port); --gang where no gang scheduler is installed. A TrainJob
cannot carry: elastic jobs, --host-network, --gpu-request dra, --network, --rdma on or
--extra-resource, --pod-patch, --working-dir, an MPI other than OpenMPI
(mpijob.k8s.render_trainjob.refusal). `--rdma auto` and `--gpu-request auto` go to a
TrainJob as TCP and the device plugin's count.

A mode asked by name is refused (one line, exit 2) where it is not installed or cannot
carry the job, before anything is created or advised; a refusal suggests only modes that
are installed and would carry the job. Pure: what is installed comes in as `Installed`.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpijob import gang as gangs
from mpijob.jobspec.elastic import refusal as elastic_refusal
from mpijob.jobspec.spec import JobSpec
from mpijob.k8s import render_trainjob

OPERATOR_NAME = "the Kubeflow MPI Operator"
TRAINER_NAME = "Kubeflow Trainer"


@dataclass(frozen=True)
class Installed:
    """What the cluster serves, as far as the mode goes. `known` False: nothing was read
    (an offline dry run, this machine): auto shows built-in pods, and a mode asked by name
    is checked only against what the job asks."""

    operator: bool = False  # kubeflow.org MPIJob served
    trainer: bool = False  # trainer.kubeflow.org TrainJob served
    # Why hvdk8s's ClusterTrainingRuntime for this job cannot be used (missing, differs),
    # with how to install it; None: installed and fits (or not readable: Trainer's webhook
    # has the last word).
    runtime_problem: str | None = None
    known: bool = True


@dataclass(frozen=True)
class ModeChoice:
    """The mode, and the line that says why (auto), or None and the refusal."""

    mode: str | None
    line: str


def blockers(spec: JobSpec, mode: str, *, gang_unserved: bool = False) -> list[str]:
    """Why `mode` cannot run this job (empty: it can). `gang_unserved`: --gang was asked
    and no gang scheduler is installed."""
    if mode == "pods":
        return []
    why = []
    if spec.elastic:
        why.append(elastic_refusal(spec, mode) or "")
    if mode == "operator":
        if spec.host_network and spec.mpi_implementation != "OpenMPI":
            why.append("--host-network with --mode operator needs --mpi openmpi: Hydra "
                       "cannot be told the job's sshd port (port 22 is the node's own sshd)")
        if gang_unserved:
            why.append(f"--gang with --mode operator needs {gangs.listed()}, and none is "
                       "installed (the operator creates the pods; nothing would hold them "
                       "back all or nothing)")
    if mode == "trainjob" and not spec.elastic and (err := render_trainjob.refusal(spec)):
        why.append(f"{err.where}: {err.message}")
    return [w.split("; use --mode")[0] for w in why]  # each refusal's own advice: ours


def _installed(mode: str, installed: Installed) -> bool:
    return mode == "pods" or not installed.known or (
        installed.operator if mode == "operator" else installed.trainer)


def _ready(mode: str, installed: Installed) -> bool:
    """Known to be installed and ready for the job (Trainer: with its runtime)."""
    if mode == "pods":
        return True
    return installed.known and _installed(mode, installed) and (
        mode != "trainjob" or installed.runtime_problem is None)


def other_modes(spec: JobSpec, asked: str, installed: Installed,
                gang_unserved: bool = False) -> str:
    """`use --mode pods or --mode X`: the other modes installed that carry the job."""
    fits = [m for m in ("pods", "operator", "trainjob") if m != asked
            and _ready(m, installed) and not blockers(spec, m, gang_unserved=gang_unserved)]
    return "use " + " or ".join(f"--mode {m}" for m in fits)


def choose_mode(asked: str, spec: JobSpec, installed: Installed, *,
                gang_unserved: bool = False) -> ModeChoice:
    """The mode the job runs in (module docstring: the table), or why none asked can."""
    if asked != "auto":
        if not _installed(asked, installed):
            what = (f"{OPERATOR_NAME} is not installed (no kubeflow.org/v2beta1 MPIJob in the "
                    "API)"
                    if asked == "operator" else
                    f"{TRAINER_NAME} is not installed (no trainer.kubeflow.org TrainJob in "
                    "the API)")
            return ModeChoice(None, f"--mode {asked}: {what}; install it, or "
                              f"{other_modes(spec, asked, installed, gang_unserved)}")
        if why := blockers(spec, asked, gang_unserved=gang_unserved):
            return ModeChoice(None, f"{why[0]}; {other_modes(spec, asked, installed, gang_unserved)}")
        return ModeChoice(asked, f"mode: {asked} (asked for)")
    if not installed.known:
        return ModeChoice("pods", "mode: pods (--mode auto, nothing read from a cluster)")
    if spec.elastic:
        return ModeChoice("pods", "mode: pods (--mode auto): only built-in pods run elastic "
                          "jobs")
    passed: list[str] = []
    if installed.operator:
        if not (why := blockers(spec, "operator", gang_unserved=gang_unserved)):
            return ModeChoice("operator", "mode: operator (--mode auto: the MPI Operator is "
                              "installed)")
        passed.append(f"not the MPI Operator: {why[0]}")
    if installed.trainer:
        why = blockers(spec, "trainjob")
        if not why and installed.runtime_problem is None:
            return ModeChoice("trainjob", "mode: trainjob (--mode auto: Kubeflow Trainer and "
                              "hvdk8s's runtime for the image are installed)")
        passed.append(f"not Kubeflow Trainer: {why[0] if why else installed.runtime_problem}")
    return ModeChoice("pods", "mode: pods (--mode auto" + (
        f"; {'; '.join(passed)}" if passed else ": no MPI Operator or Kubeflow Trainer "
        "installed") + ")")
