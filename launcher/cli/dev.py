"""`hvdk8s dev cluster`: try hvdk8s without a cluster, on the project's test API server.

The server is the `kubesim` package: a model of Kubernetes shipped beside the product,
outside its layers. Only this command imports it, when it runs.
"""

from __future__ import annotations

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


@app.command("cluster")
def cluster(
    shape: str = typer.Option("two-nodes", "--shape", metavar="SHAPE",
                              help="Which cluster to serve (--list-shapes names them)."),
    out: Path = typer.Option(None, "--write-kubeconfig", metavar="FILE",
                             help="Where to write its kubeconfig (default: "
                             "$HVDK8S_HOME/dev/kubeconfig)."),
    port: int = typer.Option(0, "--port", min=0, max=65535,
                             help="Port on 127.0.0.1 (0: a free one)."),
    list_shapes: bool = typer.Option(False, "--list-shapes", help="List the shapes and exit."),
):
    """Serve a test Kubernetes API server over TLS until Ctrl-C, and write a kubeconfig for
    kubectl and hvdk8s. Its scheduler, kubelet and controllers are models: pods "run" the
    launcher's scripted output, no container runs."""
    devcluster = _shapes()
    if list_shapes:
        for s in devcluster.SHAPES.values():
            typer.echo(f"{s.name:<10} {s.description}")
        return
    if shape not in devcluster.SHAPES:
        raise UsageError(f"--shape: unknown shape {shape!r}; choose one of "
                         f"{', '.join(devcluster.SHAPES)}")
    target = out or home() / "dev" / "kubeconfig"
    try:
        dev = devcluster.start(shape, target, port=port)
    except OSError as exc:
        raise UsageError(f"--port {port}: cannot serve on it ({exc.strerror})") from None
    typer.echo(f"test API server ({shape}) at {dev.server.url}; kubeconfig {dev.kubeconfig}")
    typer.echo(f"  export KUBECONFIG={dev.kubeconfig}")
    typer.echo("  kubectl get nodes; hvdk8s doctor; hvdk8s submit mpi --workers 4 --gpus 1 "
               "--dry-run")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        dev.server.stop()
