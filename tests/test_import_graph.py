"""No import cycles among hvdk8s's own modules (launcher/, mpijob/), and no lazy imports in
mpijob/.

The graph is read from the source (`ast`), function-level imports included: a lazy import
still makes the two modules depend on each other. Imports under `if TYPE_CHECKING:` are
left out, since they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("launcher", "mpijob")


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _runtime_nodes(tree: ast.AST):
    """Every node except those under `if TYPE_CHECKING:`."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def imports_of(module: str, path: Path, modules: dict[str, Path], *,
               type_only: bool = False) -> set[str]:
    """The project modules `module` imports; with `type_only`, those under `if
    TYPE_CHECKING:` too."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    found = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree) if type_only else _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found.update(known(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:  # `from pkg import module` imports pkg.module
                found.add(known(f"{base}.{alias.name}") if f"{base}.{alias.name}" in modules
                          else known(base))
    found.discard(None)
    found.discard(module)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_checker_finds_a_cycle_and_ignores_type_only_imports(tmp_path):
    (tmp_path / "mpijob").mkdir()
    (tmp_path / "launcher").mkdir()
    (tmp_path / "mpijob" / "__init__.py").write_text("")
    (tmp_path / "launcher" / "__init__.py").write_text("")
    (tmp_path / "mpijob" / "a.py").write_text("def f():\n    from mpijob import b\n")
    (tmp_path / "mpijob" / "b.py").write_text("from mpijob.a import f\n")
    (tmp_path / "mpijob" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from mpijob.d import X\n")
    (tmp_path / "mpijob" / "d.py").write_text("from .c import *\n")
    modules = project_modules(tmp_path)
    graph = {m: imports_of(m, p, modules) for m, p in modules.items()}
    assert cycles(graph) == [["mpijob.a", "mpijob.b"]]


def test_no_import_cycles_in_the_project():
    modules = project_modules()
    graph = {m: imports_of(m, p, modules) for m, p in modules.items()}
    assert cycles(graph) == []


def test_the_core_has_no_circle_even_of_type_only_imports():
    """A type-only import still says one module knows the other: the core's modules
    (mpijob/) stand in layers, the job's model at the bottom."""
    modules = {m: p for m, p in project_modules().items() if m.startswith("mpijob")}
    graph = {m: imports_of(m, p, modules, type_only=True) for m, p in modules.items()}
    assert cycles(graph) == []


def test_the_job_model_imports_no_renderer():
    """mpijob.jobspec is the model and its validation: what a job is, not how Kubernetes
    objects or an mpirun line are made of it (mpijob.k8s), nor how the CLI shows it."""
    modules = project_modules()
    found = {
        m: sorted(i for i in imports_of(m, p, modules, type_only=True)
                  if i.startswith(("mpijob.k8s", "mpijob.perf", "launcher")))
        for m, p in modules.items() if m.startswith("mpijob.jobspec")}
    assert {m: names for m, names in found.items() if names} == {}


def _imported_names(path: Path) -> set[str]:
    """Absolute module names that `path` imports, lazy imports included."""
    found = set()
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
    return found


def test_nothing_outside_tests_imports_the_test_tree():
    """Benchmarks and the product stand without tests/: what they share with the
    tests, such as the test API server, lives in kubesim."""
    offenders = {
        str(path.relative_to(ROOT)): sorted(n for n in _imported_names(path)
                                            if n == "tests" or n.startswith("tests."))
        for top in ("launcher", "mpijob", "benchmarks", "images")
        for path in (ROOT / top).rglob("*.py")
    }
    assert {p: names for p, names in offenders.items() if names} == {}


def test_only_dev_cluster_imports_the_model_cluster():
    """kubesim stands beside the product: `hvdk8s dev cluster` is its one user."""
    importers = sorted(
        str(path.relative_to(ROOT)) for top in ("launcher", "mpijob")
        for path in (ROOT / top).rglob("*.py")
        if any(n == "kubesim" or n.startswith("kubesim.") for n in _imported_names(path)))
    assert importers == ["launcher/cli/dev.py"]


def test_the_cli_does_not_import_the_test_doubles():
    modules = project_modules()
    graph = {m: imports_of(m, p, modules) for m, p in modules.items()}
    reached, todo = set(), ["launcher.cli.app"]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(graph.get(module, ()))
    assert sorted(m for m in reached if m.startswith("kubesim")) == []


def function_level_imports(path: Path) -> list[int]:
    """Lines of the imports inside functions (lazy imports), but not under `if TYPE_CHECKING:`."""
    lines = set()
    for fn in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines.update(node.lineno for node in _runtime_nodes(fn)
                         if isinstance(node, (ast.Import, ast.ImportFrom)))
    return sorted(lines)


def test_the_checker_finds_function_level_imports(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(
        "import json\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from mpijob.jobspec.spec import JobSpec\n"
        "def f():\n    import re\n    return re\n"
        "class C:\n    async def g(self):\n        if True:\n            from os import path\n"
        "        def h():\n            if TYPE_CHECKING:\n                import x\n"
        "            from mpijob import errors\n")
    assert function_level_imports(path) == [6, 11, 15]


def test_mpijob_has_no_function_level_imports():
    """mpijob/ is the pure core with light dependencies: a lazy import there buys no start-up
    time, so every import is at the top of its module. Where one would make an
    import cycle, move the shared code instead."""
    found = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / "mpijob").rglob("*.py"))
        # podscripts: programs run inside the pods, importing what the image may have
        if "podscripts" not in path.parts and (lines := function_level_imports(path))
    }
    assert found == {}


# Each half is organised in folders standing in layers: a folder may import only those below
# it. launcher/: the CLI sits on the pipeline, the pipeline on the backend contract, each
# backend on what jobs are prepared from, and everything on the pure core (mpijob).
LAYERS = {
    "cli": {"experiments", "pipeline", "backends.select", "backends.base", "backends.kubernetes",
            "backends.local", "agent", "preparing", "formats", "hardware", "top"},
    "experiments": {"pipeline", "backends.select", "backends.base", "preparing", "formats", "top"},
    "pipeline": {"backends.select", "backends.base", "preparing", "formats", "top"},
    "backends.select": {"backends.kubernetes", "backends.local", "top"},
    "backends.kubernetes": {"backends.base", "preparing", "formats", "top"},
    "backends.local": {"backends.base", "preparing", "formats", "hardware", "top"},
    # The DaemonSet's agent talks to the API through the Kubernetes backend's client.
    "agent": {"backends.kubernetes", "hardware", "top"},
    "backends.base": {"preparing", "top"},
    "preparing": {"formats", "top"},
    "formats": {"top"},
    "hardware": {"top"},
    "top": set(),
}
# mpijob/, from the top: rendering on prediction, prediction on placement, placement on the
# job's model, the model on the gang schedulers' declarations, and all on the shared names
# and records at mpijob/'s top (errors, well-known names, doctor's findings).
MPIJOB_LAYERS = {
    "k8s": {"perf", "scheduling", "jobspec", "gang", "top"},
    "perf": {"scheduling", "jobspec", "gang", "top"},
    "scheduling": {"jobspec", "gang", "top"},
    "jobspec": {"gang", "top"},
    "gang": {"top"},
    "top": set(),
}


def owner(module: str) -> str:
    """A launcher module's layer."""
    parts = module.split(".")
    if parts[0] == "mpijob":
        return "mpijob"
    if len(parts) == 1 or parts[1] in ("errors", "output", "timestamps"):
        return "top"
    if parts[1] == "backends":
        return "backends." + (parts[2] if len(parts) > 2 else "base")
    return parts[1]


def core_owner(module: str) -> str:
    """An mpijob module's layer: its folder, or "top" for a module directly in mpijob/."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in MPIJOB_LAYERS) else "top"


def upward_imports(modules: dict[str, Path], half: str, layers: dict[str, set[str]],
                   layer_of, *, type_only: bool = False) -> list[str]:
    """`module -> imported` for each import of `half` that leaves its layer for one not
    below it."""
    return sorted(
        f"{m} -> {t}" for m, p in modules.items() if m.split(".")[0] == half
        for t in imports_of(m, p, modules, type_only=type_only)
        if t.split(".")[0] == half and layer_of(t) not in layers[layer_of(m)] | {layer_of(m)})


def test_the_layer_check_finds_an_upward_import(tmp_path):
    for folder in ("mpijob/jobspec", "mpijob/k8s", "launcher/cli", "launcher/formats"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "mpijob" / "__init__.py").write_text("")
    (tmp_path / "launcher" / "__init__.py").write_text("")
    (tmp_path / "mpijob" / "errors.py").write_text("")
    (tmp_path / "mpijob" / "k8s" / "render.py").write_text(
        "from mpijob.jobspec import spec\nfrom mpijob import errors\n")
    (tmp_path / "mpijob" / "jobspec" / "spec.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from mpijob.k8s import render\n")
    (tmp_path / "launcher" / "cli" / "app.py").write_text("from launcher.formats import f\n")
    (tmp_path / "launcher" / "formats" / "f.py").write_text(
        "def g():\n    from launcher.cli import app\n")
    modules = project_modules(tmp_path)
    assert upward_imports(modules, "mpijob", MPIJOB_LAYERS, core_owner, type_only=True) == [
        "mpijob.jobspec.spec -> mpijob.k8s.render"]
    assert upward_imports(modules, "launcher", LAYERS, owner) == [
        "launcher.formats.f -> launcher.cli.app"]


def test_launcher_folders_import_only_the_folders_below_them():
    modules = project_modules()
    assert set(LAYERS) == {owner(m) for m in modules} - {"mpijob"}, "a folder without a layer"
    assert upward_imports(modules, "launcher", LAYERS, owner) == []


def test_mpijob_folders_import_only_the_folders_below_them():
    """Even a type-only import runs down: the core's layers know nothing above them."""
    modules = {m: p for m, p in project_modules().items() if m.startswith("mpijob")}
    assert set(MPIJOB_LAYERS) == {core_owner(m) for m in modules}, "a folder without a layer"
    assert upward_imports(modules, "mpijob", MPIJOB_LAYERS, core_owner, type_only=True) == []


def test_mpijob_imports_nothing_of_launcher():
    modules = project_modules()
    assert sorted(f"{m} -> {t}" for m, p in modules.items() if m.startswith("mpijob")
                  for t in imports_of(m, p, modules) if t.startswith("launcher")) == []


def test_the_architecture_names_every_package():
    """ARCHITECTURE.md's tables are the map: each folder of both halves, and each package
    beside them, appears there by its path."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    folders = [f"{p.parent.relative_to(ROOT)}/" for half in PACKAGES
               for p in (ROOT / half).rglob("*/__init__.py")
               # backends/ stands in four layers, each named: base.py, kubernetes/, ...
               if p.parent != ROOT / "launcher" / "backends"]
    folders += [f"{p.parent.name}/" for p in ROOT.glob("*/__init__.py")
                if p.parent.name not in (*PACKAGES, "tests")]
    assert sorted(f for f in folders if f"`{f}`" not in text) == []
