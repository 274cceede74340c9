"""`hvdk8s agent`: the topology agent that runs on every GPU node (see docs/agent.md)."""

from __future__ import annotations

import signal
import sys

import typer

from launcher.cli import options as opt
from launcher.errors import UsageError
from mpijob.k8s.agent_manifests import DEFAULT_INTERVAL_SECONDS, KUBELET_SOCKET


def register(app: typer.Typer) -> None:
    app.command(
        "agent", hidden=True,  # what the DaemonSet runs, not a command for users
        help="Report this node's GPU topology and GPU allocations as a Node annotation "
        "(runs in the hvdk8s-agent DaemonSet; install it with `hvdk8s install agent`).",
    )(agent)


def agent(
    node_name: str = typer.Option(
        None, "--node-name", envvar="NODE_NAME", show_envvar=True,
        help="The Node to annotate (the DaemonSet sets NODE_NAME from spec.nodeName; "
        "with --dry-run, this machine's host name by default).",
    ),
    interval: opt.AgentInterval = DEFAULT_INTERVAL_SECONDS,
    once: bool = typer.Option(False, "--once", help="Observe once (retrying errors), then exit."),
    kubelet_socket: str = typer.Option(
        KUBELET_SOCKET, "--kubelet-socket",
        help="The kubelet PodResources API socket.",
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the annotation value instead of patching the Node "
        "(without a kubelet: the topology, with no GPU allocations, and a note saying so)."
    ),
    sweep_only: bool = typer.Option(
        False, "--sweep-only", help="Only the start-timeout sweep of every node's hvdk8s "
        "pods, no topology (what the hvdk8s-start-guard Deployment runs)."
    ),
):
    # lazy: every CLI start imports the command modules; the agent's (NVML, gRPC, the Kubernetes
    # client) load only when it runs
    import logging

    from launcher.agent import node_agent as agent_loop
    from launcher.agent.podresources import list_pod_resources
    from launcher.hardware.nvml_topology import collect, load_nvml

    if sweep_only:
        _sweep_forever(interval, once)
        return
    if not node_name and dry_run:
        import socket

        node_name = socket.gethostname()  # a workstation or bare GPU box: this machine
    if not node_name:
        raise UsageError("--node-name: required (or set the NODE_NAME environment variable)")

    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s"
    )
    nvml = load_nvml()  # fatal, one line, when there is no NVML

    def list_pods():
        return list_pod_resources(kubelet_socket)

    if dry_run:
        printer = agent_loop.TopologyAgent(
            node_name,
            read_inventory=lambda: collect(nvml),
            list_pods=lambda: _pods_or_none(list_pods),
            get_annotation=lambda _node: None,
            patch_annotation=lambda _node, value: typer.echo(value),
        )
        agent_loop.run(printer, interval=interval, once=True)
        return

    client = agent_loop.node_client()
    node_annotation = agent_loop.NodeAnnotation(client)
    worker = agent_loop.TopologyAgent(
        node_name,
        read_inventory=lambda: collect(nvml),
        list_pods=list_pods,
        get_annotation=node_annotation.get,
        patch_annotation=node_annotation.patch,
    )
    if not once:
        # Pod deletion sends SIGTERM: stop at once, with success.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    agent_loop.run(worker, interval=interval, once=once)


def _pods_or_none(list_pods):
    """The dry run's pods: without a kubelet (a workstation, a bare GPU box) there are none to
    report, and the topology is still worth seeing; so say so once, instead of retrying."""
    from launcher.agent.podresources import PodResourcesError

    try:
        return list_pods()
    except PodResourcesError as exc:
        typer.echo(f"note: no PodResources ({exc}): the report shows no GPU allocations", err=True)
        return ()


def _sweep_forever(interval: int, once: bool) -> None:
    import logging

    from launcher.agent import node_agent as agent_loop
    from launcher.agent.start_guard_loop import StartGuard

    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s"
    )
    if not once:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    agent_loop.run(StartGuard(agent_loop.node_client()), interval=interval, once=once)
