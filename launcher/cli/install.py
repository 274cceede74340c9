"""`hvdk8s install ...`: cluster components. `install agent` deploys the topology agent."""

from __future__ import annotations

import typer

from launcher import __version__
from launcher.cli import options as opt
from launcher.errors import Refused, UsageError, UserError
from launcher.output import emit_objects
from mpijob.errors import SpecError
from mpijob.jobspec.image_ref import image_problem
from mpijob.k8s.agent_manifests import (
    DEFAULT_INTERVAL_SECONDS,
    DEFAULT_NAMESPACE,
    DEFAULT_PRIORITY_CLASS,
    agent_manifests,
    default_image,
)

app = typer.Typer(no_args_is_help=True)


@app.command("agent", help="Deploy the topology agent (a DaemonSet on GPU nodes that "
             "publishes each node's NVLink topology and GPU allocation as an annotation).")
def install_agent(
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the manifests; apply nothing."),
    namespace: str = typer.Option(
        DEFAULT_NAMESPACE, "-n", "--namespace", help="An existing namespace to run the agent in."
    ),
    image: str = typer.Option(None, "--image", metavar="REF", help="Agent image, as the "
                              "nodes pull it (build: bash images/build.sh agent). Needed "
                              "to install: no agent image is published."),
    output: opt.ObjectsOutput = opt.YAML,
    context: opt.Context = None,
    interval: opt.AgentInterval = DEFAULT_INTERVAL_SECONDS,
    priority_class: str = typer.Option(
        DEFAULT_PRIORITY_CLASS, "--priority-class",
        help="The DaemonSet pods' priorityClassName ('' for none).",
    ),
    runtime_class: str = typer.Option(
        None, "--runtime-class",
        help="runtimeClassName, e.g. 'nvidia' where the NVIDIA runtime is not the default.",
    ),
    non_root: bool = typer.Option(
        False, "--non-root",
        help="Run as nobody (65534): needs a kubelet socket the pod can open (see docs/agent.md).",
    ),
    supplemental_group: int = typer.Option(
        None, "--supplemental-group", help="With --non-root: a group that may open the socket."
    ),
):
    if supplemental_group is not None and not non_root:
        raise UsageError("--supplemental-group: only meaningful with --non-root")
    if image is None and not dry_run:
        # A default that no registry serves would put a pod in ImagePullBackOff on every
        # GPU node, at system-node-critical priority. A kubeconfig that cannot be used is
        # said first: it is the first thing to fix.
        from launcher.cli.common import INSTALL_HINT, require_kubernetes

        require_kubernetes(context, INSTALL_HINT)
        raise UsageError(f"--image: give the agent image the nodes can pull; none is "
                         f"published ({default_image(__version__)} does not exist yet): build "
                         "it with bash images/build.sh agent and push it to your registry")
    if image is not None and (why := image_problem(image)):
        raise UsageError(f"--image: {image!r} is not an image reference: {why}")
    try:
        manifests = agent_manifests(
            image=image or default_image(__version__),
            namespace=namespace,
            interval=interval,
            priority_class=priority_class or None,
            runtime_class=runtime_class or None,
            non_root=non_root,
            supplemental_group=supplemental_group,
        )
    except SpecError as exc:
        option = {
            "namespace": "-n/--namespace",
            "priority_class": "--priority-class",
            "runtime_class": "--runtime-class",
            "supplemental_group": "--supplemental-group",
        }.get(exc.field, f"--{exc.field.replace('_', '-')}")
        raise UsageError(f"{option}: {exc.message}") from None
    if dry_run:
        emit_objects(manifests, output)
        return
    for line in apply_manifests(manifests, namespace=namespace, context=context):
        typer.echo(line)


def apply_manifests(manifests: list[dict], *, namespace: str, context: str | None) -> list[str]:
    """Server-side apply each object through the one client; kubectl-like result lines."""
    # lazy: every CLI start imports the command modules; the Kubernetes client's module loads only
    # to apply
    from launcher.backends.kubernetes.client import NAMESPACE, ApiError, connect, kind_of
    from launcher.cli.common import INSTALL_HINT, require_kubernetes

    try:
        require_kubernetes(context, INSTALL_HINT)
        client = connect(context, namespace)
    except UserError as exc:
        if context:  # the option to change
            raise UsageError(str(exc) if str(exc).startswith("--context")
                             else f"--context: {exc}") from None
        raise
    try:
        exists = client.get(NAMESPACE, namespace) is not None
    except ApiError as exc:
        raise exc.user_error() from None
    if not exists:
        raise UsageError(
            f"-n/--namespace: namespace {namespace!r} does not exist; create it or pick another")
    lines = []
    for body in manifests:
        ref = f"{kind_of(body).kind.lower()}/{body['metadata']['name']}"
        try:
            created = client.apply(body)  # the manifests carry their namespace
        except ApiError as exc:
            raise exc.user_error() from None
        lines.append(f"{ref} {'created' if created else 'configured'}")
    return lines


@app.command("runtime", help="Install hvdk8s's Horovod ClusterTrainingRuntime for an image "
             "(Kubeflow Trainer mode: --mode trainjob runs its TrainJobs on it).")
def install_runtime(
    image: str = typer.Option(..., "--image", help="The training image the job runs."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the runtime; apply nothing."),
    output: opt.ObjectsOutput = opt.YAML,
    context: opt.Context = None,
    image_pull_policy: str = typer.Option(None, "--image-pull-policy",
                                          help="When the kubelet pulls the image."),
    launcher_cpu: str = typer.Option(None, "--launcher-cpu", help="The launcher's CPU."),
    launcher_memory: str = typer.Option(None, "--launcher-memory", help="The launcher's memory."),
    run_as_user: int = typer.Option(None, "--run-as-user",
                                    help="The uid the job runs as (the SSH keys' mount)."),
    ssh_port: int = typer.Option(None, "--ssh-port", help="The nodes' sshd port."),
):
    # lazy: the spec's models load only for this command
    from mpijob.jobspec.spec import build_spec
    from mpijob.k8s.render_trainjob import horovod_runtime

    given = {"image_pull_policy": image_pull_policy, "launcher_cpu": launcher_cpu,
             "launcher_memory": launcher_memory, "run_as_user": run_as_user,
             "ssh_port": ssh_port}
    try:
        spec = build_spec(name="runtime", image=image,
                          **{k: v for k, v in given.items() if v is not None})
    except SpecError as exc:
        raise UsageError(f"{exc.where}: {exc.message}") from None
    from launcher.backends.select import kubernetes_configured

    runtime = horovod_runtime(spec)
    if dry_run and context is None and not kubernetes_configured():
        emit_objects([runtime], output)  # no cluster: what would be applied to one
        return
    # A dry run on a cluster refuses what the install would: no Trainer there.
    version = _trainer_version(context)  # the newest Trainer API the cluster serves
    runtime = {**runtime, "apiVersion": f"trainer.kubeflow.org/{version}"}
    if dry_run:
        emit_objects([runtime], output)
        return
    for line in apply_manifests([runtime], namespace="default", context=context):
        typer.echo(line)


def _trainer_version(context: str | None) -> str:
    """The ClusterTrainingRuntime version served; refused where Trainer is not installed."""
    from launcher.backends.kubernetes.client import ApiError, connect
    from launcher.backends.kubernetes.trainjob import TRAINER_MISSING, runtime_kind
    from launcher.cli.common import INSTALL_HINT, require_kubernetes

    require_kubernetes(context, INSTALL_HINT)
    try:
        kind = runtime_kind(connect(context))
    except ApiError as exc:
        raise exc.user_error() from None
    if kind is None:
        raise Refused(TRAINER_MISSING.split(";")[0] + "; install Kubeflow Trainer first")
    return kind.api_version.rsplit("/", 1)[1]
