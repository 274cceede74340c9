"""`get`'s lines about a job's preflight (JobStatus.preflight, launcher.formats.preflight_reports):
its verdict, what it names, and each path's busbw against the model's."""

from __future__ import annotations

_PATHS = {"node": "in node", "nodes": "across nodes", "pair": "node pair", "job": "whole job"}


def preflight_lines(preflight: dict | None, *, wide: bool = False) -> list[str]:
    if not preflight:
        return []
    verdict, policy = preflight.get("verdict"), preflight.get("policy")
    took = f" in {preflight['seconds']:.1f}s" if preflight.get("seconds") is not None else ""
    if verdict == "running":
        head = "preflight: running"
    elif verdict == "fail":
        then = ("the program did not start" if policy == "fail" else
                "the program went on (--preflight warn)")
        head = f"preflight: FAILED{took}: {then}"
    else:
        head = f"preflight: passed{took}"
    lines = [head]
    lines += [f"  failed: {f}" for f in preflight.get("findings") or []]
    for p in preflight.get("paths") or []:
        if not wide and p.get("path") == "pair" and p.get("verdict") != "slow":
            continue
        where = "/".join(n or "?" for n in p.get("nodes") or []) or p.get("host") or "?"
        measured = p.get("busbw_gbs")
        expected = p.get("expected_gbs")
        figure = f"{measured:.3g} GB/s" if measured is not None else "-"
        against = (f" of {expected:.3g} expected ({p.get('link')})" if expected else
                   " (not judged: nothing expected)")
        mark = "SLOW " if p.get("verdict") == "slow" else ""
        lines.append(f"  {mark}{_PATHS.get(p.get('path'), p.get('path'))} {where}: "
                     f"{p.get('ranks')} ranks, busbw {figure}{against}")
    bad = [g for g in preflight.get("gpus") or [] if g.get("problems")]
    checked = len(preflight.get("gpus") or [])
    if checked:
        lines.append(f"  GPUs: {checked - len(bad)} of {checked} healthy")
    lines += [f"  note: {n}" for n in preflight.get("notes") or []]
    return lines
