"""`hvdk8s dev cluster`: try hvdk8s without a cluster, on the project's test API server.

The server is the `kubesim` package: a model of Kubernetes shipped beside the product,
outside its layers. Only this command imports it, when it runs.
"""

from __future__ import annotations

import shlex
import signal
import threading
from pathlib import Path

import typer

from launcher.errors import UsageError
from launcher.formats.home import home

app = typer.Typer(no_args_is_help=True, help="Development helpers: a test cluster.")


def _shapes():
    from kubesim import devcluster  # only this command needs the model cluster

    return devcluster


DEV_CLUSTER_HELP = """Serve a test Kubernetes API server over TLS until Ctrl-C, and write a
kubeconfig for kubectl and hvdk8s (printed: `export KUBECONFIG=...`), and a tenant's
beside it: RBAC is enforced, so the tenant may run jobs in `default` and nothing more.

Its scheduler, kubelet and controllers are models and no container runs: the kubelet plays
what hvdk8s' containers would do. The launcher waits for its workers' pods, then the
built-in benchmark prints its own lines (warm-up, steps, `total images/sec`, its result
and progress reports) at the speed `submit` predicted for the job, and ends Succeeded; the
workers end with it. Any other command plays HVDK8S_DEV_SECONDS (10) seconds and succeeds.

To see failures: an image from a registry under `.invalid` (registry.invalid/nosuch:0)
does not pull (ErrImagePull, then ImagePullBackOff), and a reference that does not parse is
InvalidImageName; `--env HVDK8S_DEV_EXIT=N` at submit (or a shell command ending in
`exit N`) makes the program exit with status N, so the launcher fails with N and mpirun's
report in its log (`wait` exits 1)."""


@app.command("cluster", help=DEV_CLUSTER_HELP)
def cluster(
    shape: str = typer.Option("two-nodes", "--shape", metavar="SHAPE",
                              help="Which cluster to serve (--list-shapes names them)."),
    out: Path = typer.Option(None, "--write-kubeconfig", metavar="FILE",
                             help="Where to write its kubeconfig (default: "
                             "$HVDK8S_HOME/dev/kubeconfig, HVDK8S_HOME being ~/.hvdk8s "
                             "unless set)."),
    port: int = typer.Option(0, "--port", min=0, max=65535,
                             help="Port on 127.0.0.1 (0: a free one)."),
    speed: float = typer.Option(1.0, "--speed", metavar="X", min=0.01, max=10000.0,
                                help="Play the containers' lives X times faster than "
                                "real time (a 20 s benchmark takes 2 s at 10)."),
    list_shapes: bool = typer.Option(False, "--list-shapes", help="List the shapes and exit."),
):
    devcluster = _shapes()
    if list_shapes:
        for s in devcluster.SHAPES.values():
            typer.echo(f"{s.name:<14} {s.description}")
        return
    if shape not in devcluster.SHAPES:
        raise UsageError(f"--shape: unknown shape {shape!r}; choose one of "
                         f"{', '.join(devcluster.SHAPES)}")
    target = out or home() / "dev" / "kubeconfig"
    try:
        dev = devcluster.start(shape, target, port=port, speed=speed)
    except OSError as exc:
        raise UsageError(f"--port {port}: cannot serve on it ({exc.strerror})") from None
    typer.echo(f"test API server ({shape}) at {dev.server.url}; kubeconfig {dev.kubeconfig}")
    for name, worker in dev.workers.items():
        typer.echo(f"  worker cluster {name} at {worker.url} (context {name})")
    typer.echo(f"  export KUBECONFIG={shlex.quote(str(dev.kubeconfig.resolve()))}")
    typer.echo("  kubectl get nodes; hvdk8s doctor; hvdk8s submit mpi --workers 4 --gpus 1 "
               "--dry-run")
    if dev.restricted_kubeconfig is not None:  # RBAC holds: a tenant's rights, to try
        typer.echo(f"  a tenant's kubeconfig (jobs in default, nothing cluster-wide): "
                   f"{shlex.quote(str(dev.restricted_kubeconfig.resolve()))}")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        dev.stop()
