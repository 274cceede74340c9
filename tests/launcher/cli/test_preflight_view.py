"""`get`'s preflight lines: the verdict and what it means for the program, what failed, each
path against the model, the GPUs; pairs only where slow, or with -o wide."""

from __future__ import annotations

from launcher.cli.preflight_view import preflight_lines


def _pre(verdict="pass", policy="warn", **kw):
    paths = [{"path": "node", "nodes": ["a"], "ranks": 8, "busbw_gbs": 300.0,
              "expected_gbs": 370.0, "link": "NVLink", "verdict": "ok"},
             {"path": "pair", "nodes": ["a", "b"], "ranks": 2, "busbw_gbs": 7.0,
              "expected_gbs": 7.4, "link": "net", "verdict": "ok"}]
    return {"verdict": verdict, "policy": policy, "findings": [], "paths": paths,
            "gpus": [{"gpu": 0, "problems": []}, {"gpu": 1, "problems": ["PCIe link x8 of x16"]}],
            "notes": [], "seconds": 12.5, **kw}


def test_a_pass_shows_figures_against_the_model_and_hides_good_pairs():
    lines = preflight_lines(_pre())
    assert lines[0] == "preflight: passed in 12.5s"
    assert "  in node a: 8 ranks, busbw 300 GB/s of 370 expected (NVLink)" in lines
    assert not any("node pair" in line for line in lines)
    assert "  GPUs: 1 of 2 healthy" in lines
    assert any("node pair a/b" in line for line in preflight_lines(_pre(), wide=True))


def test_a_failure_says_what_happened_to_the_program_and_names_the_hardware():
    failed = preflight_lines(_pre("fail", "fail", findings=["node b (pod w-1): slow"]))
    assert failed[:2] == ["preflight: FAILED in 12.5s: the program did not start",
                          "  failed: node b (pod w-1): slow"]
    warned = preflight_lines(_pre("fail", "warn"))
    assert warned[0].endswith("the program went on (--preflight warn)")


def test_unjudged_figures_say_so_and_nothing_shows_nothing():
    pre = _pre(paths=[{"path": "node", "nodes": ["vm"], "ranks": 4, "busbw_gbs": 0.1,
                       "expected_gbs": None, "verdict": "unjudged"}])
    assert "  in node vm: 4 ranks, busbw 0.1 GB/s (not judged: nothing expected)" in \
        preflight_lines(pre)
    assert preflight_lines(None) == []
    assert preflight_lines({"verdict": "running", "paths": []}) == ["preflight: running"]
