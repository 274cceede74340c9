"""A job named on the command line (`get`, `logs`, `wait`, `scale`, `delete`, `list -n`):
refused in one line, exit 2, before any path or URL is made of it (mpijob.jobspec.refs)."""

from __future__ import annotations

from launcher.errors import UsageError
from mpijob.jobspec import refs


def check_namespace(namespace: str) -> str:
    if (why := refs.namespace_problem(namespace)) is not None:
        raise UsageError(f"-n/--namespace: {why}")
    return namespace


def check_job(name: str, namespace: str) -> str:
    """The namespace, once both are known valid."""
    if (why := refs.name_problem(name)) is not None:
        raise UsageError(f"NAME: {why}")
    return check_namespace(namespace)
