"""The two speeds of the suite: the fast set (`pytest -m "not slow"`, scripts/test-fast.sh) and
the slow set (real mpirun, TensorFlow, shell scripts, images, the pod rehearsal).

A test joins the slow set through what it uses, not by hand:
- a fixture declared with `slow_fixture` (instead of `pytest.fixture`) marks every test that
  uses it, directly or through another fixture;
- a helper function decorated with `slow_helper` marks every test whose body names it.
`@pytest.mark.slow` still works for a test that starts one of these itself.

A guard keeps the fast set fast: a test outside the slow set fails when, during its setup or
its call, this process starts one of SLOW_PROGRAMS (a version query excepted), a local job's
supervisor (it runs the job's mpirun line), a Python that runs TensorFlow, or imports
TensorFlow itself. The message names the way into the slow set.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest

# Programs whose start makes a test slow: MPI launchers, shells running scripts, container
# engines, namespaces (the rehearsal).
SLOW_PROGRAMS = frozenset({
    "mpirun", "mpiexec", "mpiexec.hydra", "mpirun.openmpi", "mpirun.mpich", "orterun",
    "prterun", "horovodrun", "bash", "sh", "dash", "zsh", "docker", "buildah", "podman",
    "unshare", "nsenter",
})
# A Python child that runs mpirun or TensorFlow: the local backend's supervisor starts the
# job's mpirun line; the benchmark programs and code importing TensorFlow run it.
SUPERVISOR = "launcher.backends.local.supervisor"
TENSORFLOW_PROGRAMS = frozenset({"hvd_cnn_bench.py", "elastic.py"})
TENSORFLOW_CODE = ("import tensorflow", "from tensorflow", "horovod.tensorflow")
_SHELLS = frozenset({"bash", "sh", "dash", "zsh"})
# Asking a program what it is starts no job.
_QUERIES = frozenset({"--version", "-V", "--help"})

SLOW_FIXTURES: set[str] = set()
_SLOW_HELPER = "__hvdk8s_slow_helper__"


def slow_fixture(*args: Any, **kwargs: Any) -> Any:
    """`pytest.fixture`, and every test using the fixture is in the slow set."""
    def declare(fn: Callable) -> Any:
        SLOW_FIXTURES.add(kwargs.get("name") or fn.__name__)
        return pytest.fixture(**kwargs)(fn)
    if args and callable(args[0]) and not kwargs:
        return declare(args[0])
    return declare


def slow_helper(fn: Callable) -> Callable:
    """A helper that starts mpirun, TensorFlow, a shell script or an image: a test whose body
    names it is in the slow set."""
    setattr(fn, _SLOW_HELPER, True)
    return fn


def _names_a_slow_helper(function: Callable) -> bool:
    code = getattr(function, "__code__", None)
    if code is None:
        return False
    scope = getattr(function, "__globals__", {})
    return any(getattr(scope.get(name), _SLOW_HELPER, False) for name in code.co_names)


def is_slow(item: pytest.Item) -> bool:
    return item.get_closest_marker("slow") is not None


def put_in_the_slow_set(items: Iterable[pytest.Item]) -> None:
    """Mark the tests that use a slow fixture or name a slow helper."""
    for item in items:
        if is_slow(item):
            continue
        fixtures = set(getattr(item, "fixturenames", ()))
        function = getattr(item, "function", None)
        if fixtures & SLOW_FIXTURES or (function is not None and _names_a_slow_helper(function)):
            item.add_marker(pytest.mark.slow)


# pytest-xdist's group of the slow set: scripts/test.sh runs it on one worker, in order, with
# `--dist loadgroup`, while the other worker runs the fast set. Two slow tests never share the
# cores (their real-time windows and CPU hogs stay as measured), and each session fixture
# of the slow set (a real run, TensorFlow, an image) is made once.
SLOW_GROUP = "slow-set"


def one_worker_for_the_slow_set(items: Iterable[pytest.Item]) -> None:
    for item in items:
        if is_slow(item):
            item.add_marker(pytest.mark.xdist_group(SLOW_GROUP))


# ------------------------------------------------------------------------------ the guard
def what_makes_it_slow(argv: Sequence[str]) -> str | None:
    """The slow thing a command starts, or None."""
    if not argv:
        return None
    program = os.path.basename(str(argv[0]))
    rest = [str(a) for a in argv[1:]]
    if program in SLOW_PROGRAMS:
        if rest and (set(rest) <= _QUERIES or (program in _SHELLS and rest[0] == "-n")):
            return None  # a version, or a shell reading a script without running it
        return program
    if program.startswith("python"):
        return _what_python_runs(rest)
    return None


def _what_python_runs(args: list[str]) -> str | None:
    for i, arg in enumerate(args):
        if arg == "-m":
            module = args[i + 1] if i + 1 < len(args) else ""
            return "a local job's supervisor (mpirun)" if module == SUPERVISOR else None
        if arg == "-c":
            code = args[i + 1] if i + 1 < len(args) else ""
            return ("a Python running TensorFlow" if any(c in code for c in TENSORFLOW_CODE)
                    else None)
        if not arg.startswith("-"):  # the script
            return ("a Python running TensorFlow"
                    if os.path.basename(arg) in TENSORFLOW_PROGRAMS else None)
    return None


# What each test (by node id) started, recorded as it happens.
_started: dict[str, list[str]] = defaultdict(list)
_original_popen_init = subprocess.Popen.__init__


def _current_test() -> str | None:
    current = os.environ.get("PYTEST_CURRENT_TEST")
    return current.rsplit(" (", 1)[0] if current else None


def _recording_popen_init(self: subprocess.Popen, args: Any, *rest: Any, **kwargs: Any) -> None:
    test = _current_test()
    if test is not None:
        argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
        if kwargs.get("shell"):
            argv = ["sh", "-c", *map(str, argv)]
        slow = what_makes_it_slow([os.fsdecode(a) if isinstance(a, (bytes, os.PathLike))
                                   else str(a) for a in argv])
        if slow:
            command = " ".join(map(str, argv)).replace("\n", "\\n")
            _started[test].append(f"{slow}: {command[:120]}")
    _original_popen_init(self, args, *rest, **kwargs)


def install_guard() -> None:
    subprocess.Popen.__init__ = _recording_popen_init  # type: ignore[method-assign]


def why_not_fast(item: pytest.Item, tensorflow_before: bool) -> str | None:
    """Why a test outside the slow set is not fast, or None."""
    started = _started.pop(item.nodeid, [])
    if not tensorflow_before and "tensorflow" in sys.modules:
        started.append("imports TensorFlow in this process")
    if not started:
        return None
    return (f"{item.nodeid} is in the fast set but starts what belongs in the slow set:\n  "
            + "\n  ".join(dict.fromkeys(started))
            + "\nTake it through a fixture declared with tests.slow_set.slow_fixture or a helper "
              "decorated with tests.slow_set.slow_helper, or mark it @pytest.mark.slow.")


def forget(item: pytest.Item) -> None:
    """What a test started, once its report is made (a slow test's, a skipped one's)."""
    _started.pop(item.nodeid, None)


@slow_helper
def run_script(argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess:
    """A shell script run to its end (`subprocess.run`'s arguments): the slow set."""
    return subprocess.run(argv, **kwargs)
