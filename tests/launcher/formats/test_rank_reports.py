import io
import json
import sys
from pathlib import Path

from launcher.formats.rank_reports import REPORT_PREFIX, is_report_line, iter_reports

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "images" / "benchmark"))
import hvdk8s_report  # noqa: E402


def test_what_the_ranks_write_is_what_the_cli_reads(monkeypatch):
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "3")
    out = io.StringIO()
    hvdk8s_report.report("progress", stream=out, step=7, images_per_sec=float("nan"))
    line = out.getvalue()
    assert line.startswith(REPORT_PREFIX) and line.endswith("\n")
    (got,) = iter_reports(["[1,3]<stdout>:" + line.rstrip("\n")])
    assert (got["kind"], got["rank"], got["step"], got["images_per_sec"]) == \
        ("progress", 3, 7, None)
    assert hvdk8s_report.REPORT_PREFIX == REPORT_PREFIX


def test_cut_or_incomplete_reports_are_skipped_and_kinds_filter():
    good = {"kind": "heartbeat", "rank": 0, "time": 1.5}
    lines = [
        "plain log line",
        REPORT_PREFIX + '{"kind": "progress", "rank": 1, "ti',      # cut by a killed rank
        REPORT_PREFIX + json.dumps({"kind": "progress", "rank": -1, "time": 1.0}),
        REPORT_PREFIX + json.dumps({"kind": "progress", "rank": True, "time": 1.0}),
        REPORT_PREFIX + json.dumps({"rank": 0, "time": 1.0}),
        "[pod-0] " + REPORT_PREFIX + json.dumps(good),
        REPORT_PREFIX + json.dumps({"kind": "progress", "rank": 2, "time": 2.0, "step": 1}),
    ]
    assert [r["kind"] for r in iter_reports(lines)] == ["heartbeat", "progress"]
    assert [r["rank"] for r in iter_reports("\n".join(lines), kind="progress")] == [2]
    assert is_report_line(lines[5]) and not is_report_line(lines[0])
