"""One name per constant (issue 19): a label, resource or selector that the product spells
out is defined once, and every other module imports that name, so a rename cannot leave a
second spelling behind. The test API server is exempt: it models other programs, which
spell their names in their own sources."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def constant_strings(paths, root: Path = ROOT) -> dict[str, list[str]]:
    """Module-level UPPER_CASE names bound to a string literal, by value."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        for node in ast.parse(path.read_text()).body:
            targets = (node.targets if isinstance(node, ast.Assign) else
                       [node.target] if isinstance(node, ast.AnnAssign) else [])
            value = getattr(node, "value", None)
            names = [t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper()]
            if names and isinstance(value, ast.Constant) and isinstance(value.value, str):
                found[value.value].extend(f"{path.relative_to(root)}:{n}" for n in names)
    return found


def product_modules():
    for top in ("launcher", "mpijob"):
        for path in sorted((ROOT / top).rglob("*.py")):
            # podscripts: what runs inside the pods (its own copy of the report prefix)
            if not {"testing", "podscripts"} & set(path.relative_to(ROOT).parts):
                yield path


def test_the_checker_finds_a_value_defined_twice(tmp_path):
    (tmp_path / "a.py").write_text('GPU = "nvidia.com/gpu"\nOTHER = 1\n')
    (tmp_path / "b.py").write_text('RESOURCE = "nvidia.com/gpu"\nfrom a import GPU\n')
    found = constant_strings([tmp_path / "a.py", tmp_path / "b.py"], tmp_path)
    assert found["nvidia.com/gpu"] == ["a.py:GPU", "b.py:RESOURCE"]


def test_no_string_constant_is_defined_twice():
    # Short values ("pods", "json") are words, not names of anything.
    twice = {value: where for value, where in constant_strings(product_modules()).items()
             if len(where) > 1 and len(value) > 6}
    assert twice == {}
