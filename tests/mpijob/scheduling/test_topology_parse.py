"""`parse_topo_matrix` on real `nvidia-smi topo -m` outputs (tests/data/topo, sources in
SOURCES.md there), on damaged copies of them, and on malformed input (line numbers)."""

from __future__ import annotations

import pytest

from mpijob.scheduling.presets import PRESETS
from mpijob.scheduling.topology import TopologyParseError, parse_topo_matrix
from tests.paths import DATA as TEST_DATA

DATA = TEST_DATA / "topo"
REAL = sorted(DATA.glob("*.txt"))


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def gpu_rows(text: str) -> list[list[str]]:
    """The GPU rows' link cells, read naively from the file (independent of the parser)."""
    rows = []
    for line in text.splitlines():
        tokens = line.split()
        is_gpu_row = tokens and tokens[0].startswith("GPU") and tokens[0][3:].isdigit()
        if is_gpu_row and len(tokens) > 1 and not tokens[1].startswith("GPU"):  # not the header
            rows.append(tokens[1:])
    return rows


def test_enough_real_outputs_are_checked_in():
    assert len(REAL) >= 6
    sources = (DATA / "SOURCES.md").read_text()
    for path in REAL:
        assert path.name in sources, f"{path.name} has no source in SOURCES.md"


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_every_real_output_parses_to_a_valid_matrix(path):
    text = path.read_text(encoding="utf-8")
    topo = parse_topo_matrix(text)
    rows = gpu_rows(text)
    assert topo.gpus == len(rows)
    for i in range(topo.gpus):
        assert topo.link(i, i) == "X"
        for j in range(topo.gpus):
            assert topo.link(i, j) == topo.link(j, i)
            # Each cell is what the file says, SOC read as SYS.
            assert topo.link(i, j) == rows[i][j].replace("SOC", "SYS")
    if "CPU Affinity" in text:
        assert len(topo.cpu_affinity) == topo.gpus
        assert topo.cpu_affinity[0] == rows[0][topo.gpus + len(topo.nics)]


def test_dgx1_v100_output_is_the_dgx1_preset_with_its_nic():
    topo = parse_topo_matrix(read("dgx1-v100-mlx5.txt"))
    assert topo.links == PRESETS["dgx1-v100"].links
    assert topo.nics == ("mlx5_0",)
    assert [row[0] for row in topo.gpu_nic_links] == ["NODE", "NODE", "PIX", "PIX", "SYS", "SYS", "SYS", "SYS"]
    assert topo.cpu_affinity[:4] == ("0-11,24-35",) * 4
    assert topo.cpu_affinity[4:] == ("12-23,36-47",) * 4
    assert topo.numa == ()  # that driver printed no NUMA Affinity column


def test_h100_nic_legend_names_the_nics_and_numa_is_read():
    topo = parse_topo_matrix(read("hgx-h100-8nic.txt"))
    assert topo.gpus == 8
    assert {topo.link(i, j) for i in range(8) for j in range(8) if i != j} == {"NV18"}
    assert topo.nics == tuple(f"mlx5_{i}" for i in range(8))
    assert topo.numa == (0, 0, 0, 0, 1, 1, 1, 1)
    assert topo.gpu_nic_links[5][5] == "PIX"


def test_without_nic_legend_the_nic_columns_keep_their_header_names():
    topo = parse_topo_matrix(read("hgx-h20-vm.txt"))
    assert topo.nics == tuple(f"NIC{i}" for i in range(8))
    assert topo.gpu_nic_links[0][7] == "PIX"


def test_old_driver_soc_is_sys_and_tabs_are_separators():
    topo = parse_topo_matrix(read("k40-soc-mlx4.txt"))
    assert topo.links == (
        ("X", "PHB", "SYS", "SYS"),
        ("PHB", "X", "SYS", "SYS"),
        ("SYS", "SYS", "X", "PHB"),
        ("SYS", "SYS", "PHB", "X"),
    )
    assert topo.nics == ("mlx4_0",)


def test_empty_tab_cell_before_gpu_numa_id_does_not_shift_columns():
    topo = parse_topo_matrix(read("rtx4090-8gpu-nic-rows.txt"))
    assert topo.numa == (0, 0, 0, 0, 1, 1, 1, 1)
    assert topo.cpu_affinity[7] == "56-111,168-223"
    assert topo.gpu_nic_links[6] == ("PHB", "PHB")


# --- damaged copies of real outputs (derived here, not in the data files) ------------------
def test_ansi_colours_and_crlf_are_tolerated():
    text = read("dgx1-v100-mlx5.txt")
    coloured = text.replace("NV2", "\x1b[1;32mNV2\x1b[0m").replace("\n", "\r\n")
    assert parse_topo_matrix(coloured).links == parse_topo_matrix(text).links


def test_a_shell_prompt_before_the_matrix_is_skipped():
    text = "ubuntu@gpu-87:~$ nvidia-smi topo -m\n" + read("hgx-h100-8nic.txt")
    assert parse_topo_matrix(text).gpus == 8


def test_cells_that_lost_their_tab_are_split():
    text = read("rtx4090-8gpu-nic-rows.txt")
    glued = text.replace("GPU6\tSYS\tSYS", "GPU6\tSYSSYS").replace("\tGPU0\tGPU1", "\tGPU0GPU1")
    assert parse_topo_matrix(glued).links == parse_topo_matrix(text).links


def test_space_separated_output_pasted_without_indentation_of_the_header():
    text = read("tesla-t4-4gpu.txt").lstrip()
    assert parse_topo_matrix(text).links[1][2] == "NODE"


# --- malformed input: a clear message with the line number ---------------------------------
GOOD = (
    "        GPU0    GPU1    GPU2    CPU Affinity\n"
    "GPU0     X      NV2     SYS     0-7\n"
    "GPU1    NV2      X      SYS     0-7\n"
    "GPU2    SYS     SYS      X      8-15\n"
)


def test_the_small_good_matrix_parses():
    assert parse_topo_matrix(GOOD).links[0][1] == "NV2"


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (GOOD.replace("GPU1    NV2      X      SYS", "GPU1    NV2      X      FOO"), 3, "FOO"),
        (GOOD.replace("GPU2    SYS     SYS      X      8-15", "GPU2    SYS     SYS"), 4, "link codes"),
        (GOOD.replace("GPU1    NV2      X", "GPU1    NV1      X"), 3, "not symmetric"),
        (GOOD.replace("GPU1    NV2      X      SYS", "GPU1    NV2     NV2     SYS"), 3, "expected X"),
        (GOOD + "GPU1    NV2      X      SYS     0-7\n", 5, "twice"),
        (GOOD + "bogus line here\n", 5, "'bogus'"),
        (GOOD.replace("GPU2    SYS     SYS      X      8-15\n", ""), 3, "GPU2"),
        (GOOD.replace("GPU2    SYS     SYS      X      8-15\n", "") + "\nLegend:\n\n  X = Self\n", 3, "GPU2"),
        (GOOD.replace("GPU0    GPU1    GPU2", "GPU0    GPU2    GPU1"), 1, "GPU0..GPU2 in order"),
        ("just some text\nnot a matrix\n", 1, "no header"),
        ("garbage\n", 1, "no header"),
        ("garbage", 1, "no header"),
        ("\n\n  garbage\r\n", 3, "no header"),
        ("", 1, "no text"),
        ("GPU0     X      NV2\n" + GOOD, 1, "before the header"),
    ],
    ids=["unknown-code", "short-row", "asymmetric", "diagonal", "duplicate-row", "junk-row",
         "missing-row", "missing-row-before-legend", "header-order", "no-header",
         "one-garbage-line", "one-garbage-line-without-newline", "garbage-after-blank-lines",
         "empty", "row-before-header"],
)
def test_malformed_input_names_the_line(text, line, words):
    with pytest.raises(TopologyParseError) as info:
        parse_topo_matrix(text)
    assert info.value.line == line
    assert str(info.value).startswith(f"line {line}: ")
    assert words in str(info.value)
