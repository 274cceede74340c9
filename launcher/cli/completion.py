"""`hvdk8s completion bash|zsh|fish`: the shell script that completes hvdk8s, as kubectl's
`completion` command prints it (`source <(hvdk8s completion bash)`).

The shell runs hvdk8s with _HVDK8S_COMPLETE set; `launcher.cli.app.main` then answers with
the candidates (click's completion protocol, typer's scripts). Job names, contexts and
namespaces are completed from where the command would look; any failure completes nothing
(a completion never prints an error into the user's prompt).
"""

from __future__ import annotations

import os
from typing import Annotated, Literal, get_args

import typer

Shell = Literal["bash", "zsh", "fish"]
PROG = "hvdk8s"
COMPLETE_VAR = "_HVDK8S_COMPLETE"


def _shell(text: str) -> str:
    if text not in get_args(Shell):
        raise typer.BadParameter(f"expected bash, zsh or fish, got {text!r}")
    return text


def completion(shell: Annotated[str, typer.Argument(parser=_shell, metavar="SHELL",
                                                    help="bash, zsh or fish.")]):
    """Print the shell completion script: `source <(hvdk8s completion bash)` in ~/.bashrc,
    `hvdk8s completion zsh > "${fpath[1]}/_hvdk8s"`, or `hvdk8s completion fish | source`."""
    from typer.completion import completion_init, get_completion_script

    completion_init()
    typer.echo(get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell))


def completing() -> bool:
    """Whether the shell asks for completions (then typer's completion classes are needed)."""
    if not os.environ.get(COMPLETE_VAR):
        return False
    from typer.completion import completion_init

    completion_init()
    return True


def job_names(ctx: typer.Context, incomplete: str) -> list[str]:
    """The jobs `get`, `logs`, `wait` and `delete` would find, named from `incomplete`."""
    try:
        from launcher.cli.common import open_backend

        params = ctx.params
        backend = open_backend(params.get("backend"), params.get("context"),
                               params.get("namespace"))
        names = [s.name for s in backend.list(params.get("namespace"))]
    except Exception:  # noqa: BLE001 - no cluster, no state: nothing to offer
        return []
    return sorted(n for n in names if n.startswith(incomplete))


def contexts(incomplete: str) -> list[str]:
    try:
        from launcher.backends.kubernetes.kubeconfig import context_names

        names = context_names()
    except Exception:  # noqa: BLE001
        return []
    return sorted(n for n in names if isinstance(n, str) and n.startswith(incomplete))


def namespaces(ctx: typer.Context, incomplete: str) -> list[str]:
    try:
        from launcher.backends.kubernetes.client import NAMESPACE, connect
        from launcher.backends.kubernetes.kubeconfig import kubeconfig_usable

        context = ctx.params.get("context")
        if not kubeconfig_usable(context):
            return ["default"] if "default".startswith(incomplete) else []
        items = connect(context).items(NAMESPACE)
        names = [i["metadata"]["name"] for i in items]
    except Exception:  # noqa: BLE001
        return []
    return sorted(n for n in names if n.startswith(incomplete))


def register(app: typer.Typer) -> None:
    app.command("completion")(completion)
