"""Where a pytest run's time went, from its JUnit XML (`pytest --junitxml=FILE`):
    python3 benchmarks/suite/split.py FILE            markdown: by folder, then the costliest files
    python3 benchmarks/suite/split.py --summary FILE  one line: tests, failures, skips
Standard library only: it runs before any venv exists."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict

TOP_FILES = 25


def _cases(path: str) -> list[tuple[str, float, str]]:
    """(test file, seconds, outcome) per test case."""
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "")
        parts = module.split(".")
        # classname is the module path, then the class for a test in a class
        while parts and not parts[-1].startswith("test_") and len(parts) > 1:
            parts.pop()
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
            elif child.tag == "skipped":
                outcome = "skipped"
        cases.append(("/".join(parts) + ".py", float(case.get("time", 0)), outcome))
    return cases


def summary(path: str) -> str:
    cases = _cases(path)
    count = defaultdict(int)
    for _f, _s, outcome in cases:
        count[outcome] += 1
    return (f"{len(cases)} tests: {count['passed']} passed, {count['failed']} failed, "
            f"{count['skipped']} skipped")


def split(path: str) -> str:
    cases = _cases(path)
    total = sum(s for _f, s, _o in cases) or 1.0
    by_folder: dict[str, list[float]] = defaultdict(list)
    by_file: dict[str, list[float]] = defaultdict(list)
    for file, secs, _o in cases:
        by_folder[file.rsplit("/", 1)[0]].append(secs)
        by_file[file].append(secs)
    lines = [f"Split of one run ({summary(path)}; {total:.0f} s in tests, setup and "
             "teardown included; the wall time is in results.md).", "",
             "| folder | tests | seconds | share |", "|---|---:|---:|---:|"]
    for folder, secs in sorted(by_folder.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"| {folder} | {len(secs)} | {sum(secs):.1f} | {sum(secs) / total:.0%} |")
    lines += ["", f"The {TOP_FILES} costliest files:", "",
              "| file | tests | seconds | share |", "|---|---:|---:|---:|"]
    for file, secs in sorted(by_file.items(), key=lambda kv: -sum(kv[1]))[:TOP_FILES]:
        lines.append(f"| {file} | {len(secs)} | {sum(secs):.1f} | {sum(secs) / total:.0%} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--summary"]:
        print(summary(sys.argv[2]))
    else:
        sys.stdout.write(split(sys.argv[1]))
