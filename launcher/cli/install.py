"""`hvdk8s install ...`: cluster components. `install agent` deploys the topology agent."""

from __future__ import annotations

import typer

from launcher.errors import UsageError, UserError

app = typer.Typer(no_args_is_help=True)


@app.command("agent", help="Deploy the topology agent (a DaemonSet on GPU nodes that "
             "publishes each node's NVLink topology and GPU allocation as an annotation).")
def install_agent(
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the manifests; apply nothing."),
    namespace: str = typer.Option(
        "kube-system", "-n", "--namespace", help="An existing namespace to run the agent in."
    ),
    image: str = typer.Option(None, "--image", help="Agent image (default: ghcr.io/hvdk8s/hvdk8s-agent:<version>)."),
    output: str = typer.Option("yaml", "-o", "--output", help="yaml or json (with --dry-run)."),
    context: str = typer.Option(None, "--context", help="kubeconfig context."),
    interval: int = typer.Option(60, "--interval", help="Seconds between the agent's observations."),
    priority_class: str = typer.Option(
        "system-node-critical", "--priority-class",
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
    from launcher import __version__
    from launcher.output import check_format, emit_objects
    from mpijob.agent_manifests import agent_manifests, default_image
    from mpijob.errors import SpecError

    check_format(output, ("yaml", "json"))
    if supplemental_group is not None and not non_root:
        raise UsageError("--supplemental-group: only meaningful with --non-root")
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
    """Create each object, or replace it when it exists; kubectl-like result lines."""
    import os

    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    try:
        # KUBECONFIG read now: the client reads it once, when first imported.
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG") or None, context=context)
    except (config.ConfigException, OSError) as exc:
        if context:
            raise UsageError(f"--context: cannot use kubeconfig context {context!r}: {exc}") from None
        try:
            config.load_incluster_config()
        except config.ConfigException:
            raise UserError(f"no usable kubeconfig or in-cluster credentials: {exc}") from None
    api_client = client.ApiClient()
    core = client.CoreV1Api(api_client)
    rbac = client.RbacAuthorizationV1Api(api_client)
    apps = client.AppsV1Api(api_client)

    try:
        core.read_namespace(namespace)
    except ApiException as exc:
        if exc.status == 404:
            raise UsageError(
                f"-n/--namespace: namespace {namespace!r} does not exist; create it or pick another"
            ) from None
        raise UserError(f"cannot read namespace {namespace!r}: {exc.status} {exc.reason}") from None

    # kind -> (create, replace), each called with (name, body).
    verbs = {
        "ServiceAccount": (
            lambda name, body: core.create_namespaced_service_account(namespace, body),
            lambda name, body: core.replace_namespaced_service_account(name, namespace, body),
        ),
        "ClusterRole": (
            lambda name, body: rbac.create_cluster_role(body),
            lambda name, body: rbac.replace_cluster_role(name, body),
        ),
        "ClusterRoleBinding": (
            lambda name, body: rbac.create_cluster_role_binding(body),
            lambda name, body: rbac.replace_cluster_role_binding(name, body),
        ),
        "DaemonSet": (
            lambda name, body: apps.create_namespaced_daemon_set(namespace, body),
            lambda name, body: apps.replace_namespaced_daemon_set(name, namespace, body),
        ),
    }
    lines = []
    for body in manifests:
        kind, name = body["kind"], body["metadata"]["name"]
        create, replace = verbs[kind]
        ref = f"{kind.lower()}/{name}"
        try:
            create(name, body)
            lines.append(f"{ref} created")
        except ApiException as exc:
            if exc.status != 409:
                raise UserError(f"cannot create {ref}: {exc.status} {exc.reason}") from None
            try:
                replace(name, body)
            except ApiException as again:
                raise UserError(f"cannot replace {ref}: {again.status} {again.reason}") from None
            lines.append(f"{ref} configured")
    return lines
