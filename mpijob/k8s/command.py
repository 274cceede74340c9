"""The launch line: the program each rank runs and the mpirun line that starts them.

Everything here is argv lists; the single place that turns argv into a shell string is
`shell_join`, which quotes every word, so user input is never joined unquoted.
"""

from __future__ import annotations

import shlex
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mpijob.jobspec.decisions import Decisions
from mpijob.jobspec.defaults import MPIImplementation
from mpijob.k8s.hostnet import NCCL_SOCKET_IFNAME_DEFAULT, OMPI_TCP_EXCLUDE
from mpijob.k8s.podscripts import launch_recording_result, openmpi5_env

if TYPE_CHECKING:  # a type only: the model does not import the renderers
    from mpijob.jobspec.spec import JobSpec

# Exported to every rank: NCCL's log level and the paths the image set up.
FORWARDED_ENV = ("NCCL_DEBUG", "LD_LIBRARY_PATH", "PATH")
BENCHMARK_IN_POD = "/etc/hvdk8s/hvd_cnn_bench.py"
# The preflight (mpijob/k8s/podscripts/hvdk8s_preflight.py) and its plan
# (mpijob.perf.preflight), shipped in the job's ConfigMap beside the benchmark.
PREFLIGHT_IN_POD = "/etc/hvdk8s/hvdk8s_preflight.py"
PREFLIGHT_PLAN_IN_POD = "/etc/hvdk8s/preflight.json"
# The poster of progress to Kubeflow Trainer's status endpoint
# (mpijob/k8s/podscripts/hvdk8s_trainer_status.py), shipped with a TrainJob's files.
TRAINER_STATUS_IN_POD = "/etc/hvdk8s/hvdk8s_trainer_status.py"


def shell_join(argv: list[str] | tuple[str, ...]) -> str:
    return shlex.join(list(argv))


def benchmark_argv(spec: JobSpec, *, python: str = "python", script: str = BENCHMARK_IN_POD) -> list[str]:
    b = spec.benchmark
    gpu = spec.gpus_per_worker > 0
    argv = [
        python, script,
        "--model", b.model,
        "--batch_size", str(b.batch_size),
        "--num_batches", str(b.num_batches),
        "--num_warmup_batches", str(b.num_warmup_batches),
        "--variable_update", "horovod",
        "--device", "gpu" if gpu else "cpu",
        # NCHW is what cuDNN is fastest with; TensorFlow's CPU kernels need NHWC.
        "--data_format", "NCHW" if gpu else "NHWC",
    ]
    if b.image_size:
        argv += ["--image_size", str(b.image_size)]
    if b.use_fp16:
        argv.append("--use_fp16")
    if b.xla:
        argv.append("--xla")
    if b.data_name != "synthetic" and b.data_dir:  # the spec requires both together
        argv += ["--data_name", b.data_name, "--data_dir", b.data_dir]
    return argv


def program_argv(spec: JobSpec, **benchmark_kw) -> list[str]:
    """What one rank runs."""
    if spec.runs_benchmark:
        return benchmark_argv(spec, **benchmark_kw)
    if spec.shell:
        return ["/bin/sh", "-c", spec.command[0]]
    return list(spec.command)


@dataclass(frozen=True)
class Network:
    """Which interfaces MPI's and NCCL's traffic use: set for host-network pods only (a pod
    network has one interface)."""

    interface: str | None = None  # the one the user named (--network-interface)
    exclude: str | None = None  # else: Open MPI skips the node's bridges (mpijob.k8s.hostnet)
    nccl_ifname: str | None = None  # NCCL_SOCKET_IFNAME for every rank


@dataclass(frozen=True)
class LocalRun:
    """What running every rank on this machine adds to the line (the local backend)."""

    allow_run_as_root: bool = False
    oversubscribe: bool = False  # more ranks than cores
    cores_per_rank: int | None = None  # each rank bound to its own N cores; None: unbound


@dataclass(frozen=True)
class MpiDialect:
    """Whose mpirun reads the line: Open MPI's (`major` 4 or 5, None where the image decides
    at start: the line is then valid for both) or Hydra's (MPICH, Intel MPI)."""

    implementation: MPIImplementation
    major: int | None = None

    @property
    def hydra(self) -> bool:
        return self.implementation != "OpenMPI"


@dataclass(frozen=True)
class MpirunLine:
    """The mpirun line hvdk8s writes, as what it means; `argv` renders it, last, for the
    mpirun that reads it."""

    implementation: MPIImplementation
    np: int
    hostfile: str
    program: tuple[str, ...]
    exported_env: tuple[str, ...]  # the launcher's values of these reach every rank
    # Each rank bound to its own N cores (a local CPU job); None: ranks by slot, unbound
    # (pods: the container's CPU set is the binding; GPU ranks).
    cores_per_rank: int | None = None
    # Open MPI's transports: ob1 over TCP and shared memory, never the old openib BTL.
    mca: tuple[tuple[str, str], ...] = ()
    # Ranks sharing a pod copy through CMA, which needs CAP_SYS_PTRACE that no pod has
    # under Pod Security (open-mpi/ompi#4948: "Read -1, expected").
    no_single_copy: bool = False
    network: Network = Network()
    allow_run_as_root: bool = False
    oversubscribe: bool = False
    mpirun: str = "mpirun"

    def argv(self, dialect: MpiDialect | None = None) -> list[str]:
        dialect = dialect or MpiDialect(self.implementation)
        if dialect.hydra:
            return self._hydra_argv(dialect)
        return self._openmpi_argv(dialect)

    def _openmpi_argv(self, dialect: MpiDialect) -> list[str]:
        # Double dashes: Open MPI 5 (PRRTE) reads `-bind-to none` as the program `none`;
        # 4.1 takes both spellings.
        bound = self.cores_per_rank
        argv = [self.mpirun, "-np", str(self.np), "--hostfile", self.hostfile,
                "--bind-to", "core" if bound else "none",
                "--map-by", f"slot:PE={bound}" if bound else "slot"]
        if self.allow_run_as_root:
            argv.append("--allow-run-as-root")
        if self.oversubscribe:
            # More ranks than cores but as many as the hostfile's slots: Open MPI does not
            # know, and its ranks spin while waiting (Open MPI FAQ, "oversubscribing";
            # measured here: 4 ranks on 2 cores, an 8 MiB all-reduce 3.4 s spinning, 0.1 s
            # yielding).
            argv += ["--oversubscribe", "-mca", "mpi_yield_when_idle", "1"]
        for name in self.exported_env:
            argv += ["-x", name]
        for name, value in self.mca:
            argv += ["-mca", name, value]
        if self.no_single_copy:
            # Open MPI 5 moved single-copy into its smsc framework and ignores the 4.x
            # name; a line for either (pods, where the image decides) keeps the 4.x name.
            argv += ["-mca", "smsc", "^cma"] if dialect.major == 5 else \
                    ["-mca", "btl_vader_single_copy_mechanism", "none"]
        net = self.network
        if net.interface:
            argv += ["-mca", "btl_tcp_if_include", net.interface,
                     "-mca", "oob_tcp_if_include", net.interface]
        elif net.exclude:
            argv += ["-mca", "btl_tcp_if_exclude", net.exclude,
                     "-mca", "oob_tcp_if_exclude", net.exclude]
        if net.nccl_ifname:
            argv += ["-x", f"NCCL_SOCKET_IFNAME={net.nccl_ifname}"]
        return argv + list(self.program)

    def _hydra_argv(self, dialect: MpiDialect) -> list[str]:
        hostfile_flag = "-hostfile" if dialect.implementation == "Intel" else "-f"
        argv = [self.mpirun, "-n", str(self.np), hostfile_flag, self.hostfile]
        if self.exported_env:
            argv += ["-envlist", ",".join(self.exported_env)]
        if self.cores_per_rank:  # Hydra binds each rank to N cores as core:N
            argv += ["-bind-to", f"core:{self.cores_per_rank}"]
        # Hydra's own traffic follows the hostnames (node addresses): only a named
        # interface is given; Hydra runs as root and oversubscribes without being told.
        if self.network.interface:
            argv += ["-iface", self.network.interface]
        if self.network.nccl_ifname:
            argv += ["-genv", "NCCL_SOCKET_IFNAME", self.network.nccl_ifname]
        return argv + list(self.program)


def _decided(spec: JobSpec, decided: Decisions | None) -> Decisions:
    """The plan's decisions; a spec rendered without a plan gets what it names."""
    return decided if decided is not None else Decisions.undecided(spec)


def mpirun_line(spec: JobSpec, hostfile: str, *, program: list[str] | None = None,
                mpirun: str = "mpirun", local: LocalRun | None = None,
                set_env: Collection[str] | None = None,
                decided: Decisions | None = None) -> MpirunLine:
    """The mpirun line hvdk8s writes when the user did not write one. `set_env`: the names
    set where mpirun runs; the others are not exported (mpirun warns of each in the log)."""
    program = program if program is not None else program_argv(spec)
    job_env = _decided(spec, decided).job_env(spec)
    env_names = list(FORWARDED_ENV) + [k for k in job_env if k not in FORWARDED_ENV]
    if set_env is not None:
        env_names = [name for name in env_names if name in set_env]
    if spec.host_network and spec.network_interface:
        network = Network(interface=spec.network_interface, nccl_ifname=spec.network_interface)
    elif spec.host_network:  # the node's own NICs, not its bridges (mpijob.k8s.hostnet)
        network = Network(exclude=OMPI_TCP_EXCLUDE, nccl_ifname=NCCL_SOCKET_IFNAME_DEFAULT)
    else:
        network = Network()
    local = local or LocalRun()
    return MpirunLine(
        implementation=spec.mpi_implementation, np=spec.ranks, hostfile=hostfile,
        program=tuple(program), exported_env=tuple(env_names),
        cores_per_rank=local.cores_per_rank, mca=(("pml", "ob1"), ("btl", "^openib")), no_single_copy=True, network=network,
        allow_run_as_root=local.allow_run_as_root, oversubscribe=local.oversubscribe,
        mpirun=mpirun,
    )


def mpirun_argv(spec: JobSpec, hostfile: str, *, program: list[str] | None = None,
                decided: Decisions | None = None) -> list[str]:
    """The line of a launcher pod: valid for the image's mpirun whichever it is."""
    return mpirun_line(spec, hostfile, program=program, decided=decided).argv()


def launch_argv(spec: JobSpec, hostfile: str, *, rsh_args: str | None = None,
                decided: Decisions | None = None) -> list[str]:
    """The launcher's command: the user's own mpirun line untouched, or the one we write;
    after the preflight unless --preflight off. `rsh_args`: put on our mpirun lines
    (operator mode on the host network: the line beats the operator's environment)."""
    decided = _decided(spec, decided)
    if spec.user_gives_mpirun:
        main = users_line(spec)
    else:
        main = _with_rsh(mpirun_argv(spec, hostfile, decided=decided), rsh_args)
    if not decided.runs_preflight:
        return main
    pre = _with_rsh(mpirun_argv(spec, hostfile, program=preflight_program(spec, decided=decided),
                                decided=decided), rsh_args)
    return preflight_then(str(decided.preflight), pre, main)


def users_line(spec: JobSpec) -> list[str]:
    """The user's own mpirun/horovodrun line, untouched."""
    return ["/bin/sh", "-c", spec.command[0]] if spec.shell else list(spec.command)


def _with_rsh(argv: list[str], rsh_args: str | None) -> list[str]:
    return argv if rsh_args is None else [argv[0], "-mca", "plm_rsh_args", rsh_args, *argv[1:]]


def preflight_config(spec: JobSpec, files: dict[str, str] | None, *,
                     decided: Decisions | None = None) -> dict[str, str]:
    """The ConfigMap entries the preflight needs (its program and plan), none when off."""
    if not _decided(spec, decided).runs_preflight:
        return {}
    if files is None:
        raise ValueError("the preflight runs from the job's ConfigMap: pass its files")
    return dict(files)


def preflight_program(spec: JobSpec, *, python: str = "python", script: str = PREFLIGHT_IN_POD,
                      plan_file: str = PREFLIGHT_PLAN_IN_POD,
                      plan_json: str | None = None, decided: Decisions | None = None) -> list[str]:
    """What each rank runs first: the preflight, with its plan from the ConfigMap's file or,
    on this machine, on its line."""
    argv = [python, script, "--policy", str(_decided(spec, decided).preflight)]
    return argv + (["--plan-json", plan_json] if plan_json is not None else ["--plan", plan_file])


def preflight_then(policy: str, preflight: list[str] | str, main: list[str]) -> list[str]:
    """The preflight's line (argv, or shell text that computes it at start), then the
    program's (exec'd: signals and the exit status are its own). Under fail, a preflight
    that does not pass (its verdict, exit 86, or any failure to run) ends the launch before
    the program starts; under warn it is said and the program starts."""
    if policy == "fail":
        after = ('  echo "hvdk8s: preflight failed (exit $status; hvdk8s get names the '
                 'hardware): the program does not start (--preflight fail)" >&2\n'
                 '  exit "$status"\n')
    else:
        after = ('  echo "hvdk8s: preflight ended with exit $status (hvdk8s get says why); '
                 'the program starts (--preflight warn)" >&2\n')
    script = (f'echo "hvdk8s: preflight (--preflight {policy})"\n'
              f"{preflight if isinstance(preflight, str) else shell_join(preflight)}\n"
              "status=$?\n"
              'if [ "$status" -ne 0 ]; then\n' + after + "fi\n"
              'exec "$@"\n')
    return ["/bin/sh", "-c", script, "hvdk8s-preflight", *main]


def hostfile_text(spec: JobSpec, hosts_and_slots: list[tuple[str, int]]) -> str:
    """OpenMPI writes `host slots=N`; Hydra (Intel MPI, MPICH) writes `host:N`."""
    if spec.mpi_implementation == "OpenMPI":
        lines = [f"{host} slots={slots}" for host, slots in hosts_and_slots]
    else:
        lines = [f"{host}:{slots}" for host, slots in hosts_and_slots]
    return "\n".join(lines) + "\n"


# Operator mode: the MPI Operator may start the launcher before its workers answer (with
# launcherCreationPolicy AtStartup, and with WaitForWorkersReady too when Kueue unsuspends
# the MPIJob: the launcher Job already exists then; kubeflow/mpi-operator
# pkg/controller/mpi_job_controller.go syncHandler), and mpirun gives up after a few ssh
# attempts (OMPI_MCA_plm_rsh_args "-o ConnectionAttempts=10"). So the launcher first waits
# for every host in the operator's hostfile to answer on ssh, as the built-in launcher.sh
# does; HVDK8S_WORKER_WAIT_SECONDS=0 waits without limit (a gang scheduler's queue).
# The port is the job's (HVDK8S_SSH_PORT, the same Decisions.ssh_port the worker's `sshd -p`
# gets), for the wait and, through the rsh/bootstrap arguments, for mpirun itself: a port
# left to the image's ssh_config and sshd_config disagrees whenever one of them is not the
# image's own (`-o Port=22` against hvdk8s' image's sshd on 2222).
# mpirun then runs as a child, not exec'd, so that its result reaches the termination
# message (podscripts launch_recording_result); SIGTERM (deletion, deadline) is passed on.
OPERATOR_WAIT_SCRIPT = """limit="${HVDK8S_WORKER_WAIT_SECONDS:-600}"
sshport="${HVDK8S_SSH_PORT:+-oPort=$HVDK8S_SSH_PORT}"
# The operator mounts the key at sshAuthMountPath, $HOME/.ssh with --run-as-user; ssh looks
# in the passwd entry's home (OpenSSH ssh.c: pw->pw_dir), which may be another: name it.
[ -f "${HOME:-/nonexistent}/.ssh/id_rsa" ] && sshport="$sshport -i $HOME/.ssh/id_rsa"
deadline=$(( $(date +%s) + limit ))
for h in $(sed -e 's/[: ].*//' -e '/^$/d' "$HVDK8S_HOSTFILE"); do
  until ssh $sshport -o ConnectTimeout=5 -o StrictHostKeyChecking=no -o BatchMode=yes \\
      -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "$h" true >/dev/null 2>&1; do
    if [ "$limit" -gt 0 ] && [ "$(date +%s)" -ge "$deadline" ]; then
      echo "hvdk8s: worker $h did not answer on ssh within ${limit}s" >&2
      exit 1
    fi
    sleep "${HVDK8S_WAIT_INTERVAL:-2}"
  done
  echo "hvdk8s: worker $h is ready"
done
# The workers' host keys are made in their pods: there is nothing to check them against. The
# operator's own images turn the check off in ssh_config; a stock image asks, and every ssh
# of mpirun fails ("Host key verification failed"). Appended to what the operator set. MPICH's
# Hydra reads HYDRA_LAUNCHER_EXTRA_ARGS; the operator sets HYDRA_LAUNCH_EXTRA_ARGS, which
# mpiexec.hydra does not read, so its arguments are carried over.
nohostkey="$sshport -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
export OMPI_MCA_plm_rsh_args="${OMPI_MCA_plm_rsh_args:-} $nohostkey"
export HYDRA_LAUNCHER_EXTRA_ARGS="${HYDRA_LAUNCHER_EXTRA_ARGS:-${HYDRA_LAUNCH_EXTRA_ARGS:-}} $nohostkey"
export I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS="${I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS:-} $nohostkey"
""" + openmpi5_env() + launch_recording_result() + """trap 'kill -TERM "$child" 2>/dev/null' TERM INT
hvdk8s_launch "$@"
while :; do
  wait "$child"
  status=$?
  kill -0 "$child" 2>/dev/null || break
done
hvdk8s_launched "$status"
exit "$status"
"""


# The operator-mode worker runs the image's sshd as the MPI Operator would (`sshd -De`), with
# what a stock image lacks: the privilege separation directory and host keys (made at
# image build, or by systemd, never in a pod), and StrictModes off, since the operator mounts
# the SSH Secret at ~/.ssh, a tmpfs whose directory is drwxrwxrwt, which StrictModes refuses
# (the operator's own base images set `StrictModes no` for that reason).
# sshd finds authorized_keys in the passwd entry's home (%h); with --run-as-user the
# operator mounts them in $HOME/.ssh, which may be another, so that file is named first.
OPERATOR_SSHD_SCRIPT = """mkdir -p /run/sshd 2>/dev/null
ls /etc/ssh/ssh_host_*_key >/dev/null 2>&1 || ssh-keygen -A >/dev/null
keys=".ssh/authorized_keys"
[ -f "${HOME:-/nonexistent}/.ssh/authorized_keys" ] && keys="$HOME/.ssh/authorized_keys $keys"
exec /usr/sbin/sshd -De -o StrictModes=no -o "AuthorizedKeysFile=$keys" \
  -o AllowTcpForwarding=no -o AllowStreamLocalForwarding=no -o AllowAgentForwarding=no \
  -o PermitTunnel=no -o X11Forwarding=no "$@"
"""


def operator_sshd(extra_args: list[str]) -> list[str]:
    """The operator-mode worker command: sshd in the foreground, logging to stderr, with no
    forwarding of any kind (mpirun's daemons connect back directly: a worker's sshd that
    forwards would let the job's key open tunnels from inside the cluster network)."""
    return ["/bin/sh", "-c", OPERATOR_SSHD_SCRIPT, "hvdk8s-sshd", *extra_args]


def wait_then_launch(argv: list[str]) -> list[str]:
    """The operator-mode launcher command: wait for the workers' sshd, then exec argv."""
    return ["/bin/sh", "-c", OPERATOR_WAIT_SCRIPT, "hvdk8s-launcher", *argv]

