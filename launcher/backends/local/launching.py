"""What a local job runs, decided before anything starts: the ranks this machine can hold,
the GPUs they get, the MPI found here, the mpirun line (mpijob.k8s.command's MpirunLine,
rendered last for that MPI) and the ranks' environment; and what the job's options mean
here (what is refused, what is ignored).

The local backend's plan and prepare: a dry run prints what `prepare` returns and `submit`
starts exactly it (launcher.backends.local.backend extends this, as the Kubernetes backend
extends its rendering). Reads this machine (cores, GPUs, which mpirun), starts nothing.
"""

from __future__ import annotations

import glob
import os
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path

from launcher.backends.base import BaseBackend, ModeDecision, Prepared, SubmitOptions
from launcher.backends.local import elastic as local_elastic
from launcher.backends.local import rank as local_rank
from launcher.backends.local.gpus import choose_gpus
from launcher.backends.local.mpi import (
    LocalMpi,
    benchmark_script,
    check_mpi,
    cores_per_rank,
    environment,
    usable_cores,
)
from launcher.backends.local.state import JobPaths, job_paths
from launcher.errors import UsageError, UserError
from launcher.preparing.planning import Plan
from mpijob.jobspec import defaults
from mpijob.jobspec.decisions import Decisions
from mpijob.jobspec.spec import DECLARED_BY_PATH, DECLARED_OPTIONS, JobSpec
from mpijob.k8s import command
from mpijob.k8s.command import MpiDialect, hostfile_text, shell_join
from mpijob.k8s.render_elastic import elastic_program, horovodrun_argv
from mpijob.perf.perfmodel import Assumptions
from mpijob.plural import plural
from mpijob.scheduling.cluster import Cluster

# Ranks per usable core at most: each rank is a process here, and past this many a job
# only thrashes the machine (and may exhaust its process and memory limits).
MAX_RANKS_PER_CORE = 16


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # set on top of the caller's
    mpi: MpiDialect | None = None  # whose mpirun runs it; None: the user's own line
    rank_logs: bool = False  # each rank runs under the rank wrapper, which keeps its log


@dataclass(frozen=True)
class JobLaunch:
    """Everything a local job's start needs, decided once."""

    paths: JobPaths
    launch: Launch
    gpus: list[int]
    host: str
    hostfile: str


@dataclass(frozen=True, kw_only=True)
class LocalPrepared(Prepared):
    """The local backend's Prepared: its one object describes `job`, which `submit` starts
    (as TorchX's AppDryRunInfo carries the request its dry run prints)."""

    job: JobLaunch


class LocalLaunches(BaseBackend):
    name = "local"

    def check_spec(self, spec: JobSpec) -> list[str]:
        """What only pods have is refused, not ignored: a job whose data mount silently went
        missing would read nothing or the wrong files."""
        pod_only = _not_here(spec, "refuse")
        if pod_only:
            raise UsageError(f"{pod_only[0]} applies to Kubernetes pods; this job runs on this "
                             "machine (local backend), where the ranks are processes that "
                             "read its files directly (give the path in your command or "
                             "--benchmark-data-dir)")
        if spec.working_dir and not os.path.isdir(spec.working_dir):
            raise UsageError(f"--working-dir {spec.working_dir}: no such directory on this machine")
        data_dir = spec.benchmark.data_dir
        if spec.runs_benchmark and data_dir and not glob.glob(os.path.join(data_dir, "train-*-of-*")):
            raise UsageError(f"--benchmark-data-dir {data_dir}: no ImageNet TFRecords "
                             "(train-*-of-*) there; make a small set with "
                             "python scripts/make_imagenet_tfrecords.py DIR")
        return []

    def plan(self, spec: JobSpec, cluster: Cluster | None, assumptions: Assumptions | None,
             *, mode: ModeDecision | None = None) -> Plan:
        """The ranks share this machine: nothing to place; a CPU job is predicted only from
        a calibration."""
        if spec.rdma == "on" or spec.extra_resources:
            raise UsageError(f"{'--rdma on' if spec.rdma == 'on' else '--extra-resource'}: "
                             "device resources are Kubernetes's; the local backend runs the "
                             "ranks on this machine (use --backend kubernetes)")
        # what this backend decides: --preflight where not given (no RDMA, no placement)
        decisions = Decisions(gpu_request="device-plugin", ssh_port=spec.ssh_port,
                              preflight=spec.preflight or (defaults.PREFLIGHT_LOCAL_GPU
                                                           if spec.gpus_per_worker
                                                           else defaults.PREFLIGHT_LOCAL_CPU))
        if assumptions is None or spec.gpus_per_worker:
            return Plan(spec, decisions=decisions)
        from mpijob.perf.perfmodel import predict_cpu

        try:
            prediction = predict_cpu(model=spec.benchmark.model,
                                     batch_size=spec.benchmark.batch_size,
                                     precision=spec.benchmark.precision, ranks=spec.workers,
                                     hosts=1, image_size=spec.benchmark.image_size,
                                     assumptions=assumptions)
        except ValueError as exc:
            return Plan(spec, notes=(f"no prediction: {exc}",), decisions=decisions)
        return Plan(spec, prediction=prediction, decisions=decisions)

    def prepare(self, plan: Plan, options: SubmitOptions) -> LocalPrepared:
        spec = plan.spec
        job = self.launch(spec, plan.placement, job_paths(spec.name, spec.namespace),
                          plan.decisions)
        return LocalPrepared(spec, plan, (described(spec, job, plan.decisions),), job=job)

    def launch(self, spec: JobSpec, placement, paths: JobPaths,
               decided: Decisions | None = None) -> JobLaunch:
        """The job's launch, checked against this machine (cores, mpirun, free GPUs)."""
        check_rank_count(spec, usable_cores())
        if spec.elastic:  # what this machine cannot give, before its GPUs are looked at
            local_elastic.check(spec, sys.executable)
        mpi = None if spec.elastic else check_mpi(spec)  # elastic: horovodrun, no mpirun
        script = benchmark_script() if spec.runs_benchmark else None
        host = socket.gethostname()
        gpus, _ = choose_gpus(spec, placement, host)
        launch = build_launch(spec, mpi=mpi, hostfile=paths.hostfile, job_dir=paths.dir,
                              gpus=gpus, script=script, decided=decided)
        return JobLaunch(paths, launch, gpus, host,
                         hostfile_text(spec, [("localhost", spec.ranks)]))


def described(spec: JobSpec, job: JobLaunch, decided: Decisions | None = None) -> dict:
    """The launch as a dry run prints it."""
    out = {
        "backend": LocalLaunches.name, "name": spec.name, "namespace": spec.namespace,
        "node": job.host, "ranks": spec.ranks, "gpus": job.gpus,
        "hostfile": job.hostfile, "command": shell_join(job.launch.argv),
        "env": job.launch.env, "dir": str(job.paths.dir),
    }
    if spec.elastic:  # horovodrun's hosts, not a hostfile: what its discovery lists
        del out["hostfile"]
        out["hosts"] = local_elastic.host_slots(spec)
    notes = [n for n in (ignored_options_note(spec), preflight_note(spec, decided)) if n]
    if notes:
        out["notes"] = notes
    return out


def _decided(spec: JobSpec, decided: Decisions | None) -> Decisions:
    """The plan's decisions; a spec launched without a plan gets what it names."""
    return decided if decided is not None else Decisions.undecided(spec)


def preflight_note(spec: JobSpec, decided: Decisions | None = None) -> str | None:
    """Where this backend does not run the preflight the job asks for, said."""
    if (not _decided(spec, decided).runs_preflight or spec.elastic
            or not spec.user_gives_mpirun):
        return None
    return ("local backend: no preflight before the job's own launch line (it runs before "
            "the mpirun line hvdk8s writes); --preflight off says nothing")


def build_launch(spec: JobSpec, *, mpi: LocalMpi | None, hostfile: Path, job_dir: Path | None,
                 gpus: list[int], python: str = sys.executable, script: Path | None = None,
                 cores: int | None = None, is_root: bool | None = None,
                 environ: dict[str, str] | None = None,
                 decided: Decisions | None = None) -> Launch:
    """The mpirun line and environment. With `job_dir`, every rank's program runs under
    the rank wrapper (local_rank): the job's commands first on PATH, the rank's own log,
    and how it ended, all in that directory. `decided`: the plan's decisions (None: what
    the spec names)."""
    decided = _decided(spec, decided)
    environ = dict(os.environ if environ is None else environ)
    cores = usable_cores() if cores is None else cores
    is_root = (os.geteuid() == 0) if is_root is None else is_root
    env = environment(spec, gpus=gpus, cores=cores, is_root=is_root, environ=environ)
    user_path = env.get("PATH", environ.get("PATH", ""))
    kw = {"python": python, "script": str(script)} if spec.runs_benchmark else {}
    if spec.elastic:
        # horovodrun elastic (launcher.backends.local.elastic); each rank under the wrapper.
        wrapped = _under_rank_wrapper(python, job_dir, elastic_program(spec, **kw))
        env[local_rank.PATH_ENV] = user_path
        runner = local_elastic.check(spec, python)
        discovery = str((job_dir or Path(".")) / local_elastic.DISCOVERY)
        argv = horovodrun_argv(spec, horovodrun=runner, discovery=discovery, program=wrapped,
                               nic=local_elastic.INTERFACE)
        if decided.runs_preflight:  # at the start: every rank on this machine, one Gloo run
            ranks = str(spec.ranks)
            check = [runner, "--gloo", "-np", ranks, "-H", f"localhost:{ranks}",
                     "--network-interface", local_elastic.INTERFACE,
                     *preflight_argv(spec, python, gpus, decided), "--uniform-slots", ranks]
            argv = command.preflight_then(str(decided.preflight), check, argv)
        return Launch(argv, env, None, rank_logs=job_dir is not None)
    if mpi is None:
        # The user's own mpirun/horovodrun line, untouched; its ranks find the job's
        # commands first as long as that mpirun is found by name (no implied prefix).
        if job_dir is not None:
            env["PATH"] = os.pathsep.join(p for p in (str(job_dir / local_rank.SHIMS), user_path) if p)
        return Launch(command.users_line(spec), env)

    program = _under_rank_wrapper(python, job_dir, command.program_argv(spec, **kw))
    if job_dir is not None:
        env[local_rank.PATH_ENV] = user_path
    local = command.LocalRun(allow_run_as_root=is_root, oversubscribe=spec.ranks > cores,
                             cores_per_rank=cores_per_rank(spec, cores) if not gpus else None)
    line = command.mpirun_line(spec, str(hostfile), program=program, mpirun=mpi.mpirun,
                               local=local, set_env={**environ, **env}, decided=decided)
    argv = line.argv(mpi.dialect)
    if decided.runs_preflight:
        pre = command.mpirun_line(spec, str(hostfile),
                                  program=preflight_argv(spec, python, gpus, decided),
                                  mpirun=mpi.mpirun, local=local, set_env={**environ, **env},
                                  decided=decided)
        argv = command.preflight_then(str(decided.preflight), pre.argv(mpi.dialect), argv)
    return Launch(argv, env, mpi.dialect, rank_logs=job_dir is not None)


def preflight_argv(spec: JobSpec, python: str, gpus: list[int], decided: Decisions) -> list[str]:
    """The preflight on this machine: every rank in one host's group, its plan on the line
    (no expectation: a CPU MPI all-reduce is not modelled; this machine's GPUs are not
    placed by the model)."""
    import json
    from importlib import resources

    from mpijob.perf.preflight import plain_plan

    script = resources.files("mpijob.k8s.podscripts").joinpath("hvdk8s_preflight.py")
    plan = plain_plan([spec.ranks], gpus=bool(gpus), nodes=[socket.gethostname()])
    return command.preflight_program(spec, python=python, script=str(script), decided=decided,
                                     plan_json=json.dumps(plan, separators=(",", ":"),
                                                          sort_keys=True))


def _under_rank_wrapper(python: str, job_dir: Path | None, program: list[str]) -> list[str]:
    """Each rank's program run by the rank wrapper (local_rank), which keeps its log and exit
    in `job_dir`; as given where there is no job directory."""
    if job_dir is None:
        return program
    return [python, "-S", str(Path(local_rank.__file__).resolve()), str(job_dir), *program]


def check_rank_count(spec: JobSpec, cores: int) -> None:
    """UserError, before anything starts, for more ranks than this machine can run."""
    limit = MAX_RANKS_PER_CORE * max(cores, 1)
    if spec.ranks <= limit:
        return
    asked = (f"--workers {spec.workers} x --gpus {spec.gpus_per_worker}" if spec.gpus_per_worker
             else f"--workers {spec.workers}")
    raise UserError(
        f"{asked} is {plural(spec.ranks, 'rank')}, and the local backend runs each rank as a "
        f"process on this machine: with {plural(cores, 'core')} it takes at most {limit} "
        f"({MAX_RANKS_PER_CORE} per core); give fewer workers, or --backend kubernetes"
    )


# Spec fields that only mean something to Kubernetes (pods, images, the scheduler).
def _given(spec: JobSpec, path: str):
    """The value of a declared option's field when it is not the spec's default."""
    declared, value = DECLARED_BY_PATH[path], spec
    for part in path.split("."):
        value = getattr(value, part)
    return value if value != declared.default else None


def _not_here(spec: JobSpec, what: str) -> list[str]:
    """The options given that this backend does not use (`what`: ignore) or must refuse
    (refuse), as each declares where it applies (mpijob.jobspec.spec.Flag)."""
    return [d.flag.option for d in DECLARED_OPTIONS
            if LocalLaunches.name not in d.flag.backends and d.flag.elsewhere == what
            and _given(spec, d.path) not in (None, (), {})]


def ignored_options(spec: JobSpec, mode: str | None = None) -> list[str]:
    """The options given for this job that the local backend does not use, by option name."""
    names = [f"--mode {mode}"] if mode in ("operator", "trainjob") else []
    names += _not_here(spec, "ignore")
    if spec.gang != defaults.GANG_SCHEDULER:
        names.append("--gang-scheduler")
    if spec.cpu and spec.gpus_per_worker:  # CPU ranks are bound to --cpu cores (local_mpi)
        names.append("--cpu")
    return list(dict.fromkeys(names))


def ignored_options_note(spec: JobSpec, mode: str | None = None) -> str | None:
    names = ignored_options(spec, mode)
    if not names:
        return None
    they = "it applies" if len(names) == 1 else "they apply"
    return f"local backend: ignoring {', '.join(names)} ({they} to Kubernetes)"
