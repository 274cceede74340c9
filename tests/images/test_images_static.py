"""Static checks of images/: no container engine here, so the Dockerfiles are parsed.

Every COPY/ADD source exists in the build context (the repository root), base images are
pinned, in-image scripts are executable, versions agree with pyproject.toml and
scripts/setup.sh, and the paths, port and Secret names agree with the code that uses them.
"""

from __future__ import annotations

import ast
import glob
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.paths import ROOT
from tests.slow_set import run_script

REPO = ROOT
IMAGES = REPO / "images"
TRAIN = IMAGES / "train" / "Dockerfile"
AGENT = IMAGES / "agent" / "Dockerfile"
DOCKERFILES = [TRAIN, AGENT]
BENCHMARK = IMAGES / "benchmark" / "hvd_cnn_bench.py"


# ---------------------------------------------------------------------------- parsing
def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out, buf = [], ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line.startswith("#") or (not line and not buf):
            continue  # Docker drops comment lines, also inside a continuation
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        if buf.strip():
            word, _, rest = buf.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
        buf = ""
    assert not buf, f"{path}: dangling line continuation"
    return out


def arg_defaults(path: Path) -> dict[str, str]:
    defaults = {}
    for word, rest in instructions(path):
        if word == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            defaults[name.strip()] = value.strip().strip('"')
    return defaults


def substitute(text: str, variables: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)",
                  lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), text)


def copies(path: Path) -> list[tuple[list[str], str, dict[str, str]]]:
    """(sources, destination, flags) of every COPY and ADD."""
    result = []
    for word, rest in instructions(path):
        if word not in ("COPY", "ADD"):
            continue
        flags = {}
        while rest.startswith("--"):
            flag, _, rest = rest.partition(" ")
            name, _, value = flag[2:].partition("=")
            flags[name] = value
            rest = rest.strip()
        args = json.loads(rest) if rest.startswith("[") else rest.split()
        assert len(args) >= 2, f"{path}: {word} {rest}"
        result.append((args[:-1], args[-1], flags))
    return result


def exec_form(path: Path, instruction: str) -> list[str] | None:
    found = [rest for word, rest in instructions(path) if word == instruction]
    return json.loads(found[-1]) if found else None


def _pyproject() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _constant(path: Path, name: str) -> str:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path} has no {name}")


def _directive(path: Path, key: str) -> list[str]:
    """Values of `Key value` lines in an ssh config."""
    values = []
    for line in path.read_text().splitlines():
        parts = line.strip().split(None, 1)
        if len(parts) == 2 and parts[0].lower() == key.lower():
            values.append(parts[1].strip())
    return values


# ---------------------------------------------------------------------- the contexts
@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_every_copy_source_exists_in_the_build_context(dockerfile):
    variables = arg_defaults(dockerfile)
    found = 0
    for sources, _dest, flags in copies(dockerfile):
        if "from" in flags:
            continue  # from another stage or image, not the context
        for source in sources:
            source = substitute(source, variables)
            assert not source.startswith(("/", "..")), f"{source}: outside the build context"
            assert not source.startswith(("http://", "https://")), f"{source}: use RUN curl"
            assert glob.glob(str(REPO / source)), f"{dockerfile}: COPY source {source} missing"
            found += 1
    assert found


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_base_images_are_pinned_to_explicit_tags(dockerfile):
    variables = arg_defaults(dockerfile)
    stages: set[str] = set()
    froms = [rest for word, rest in instructions(dockerfile) if word == "FROM"]
    assert froms
    for rest in froms:
        words = [w for w in rest.split() if not w.startswith("--")]
        image = substitute(words[0], variables)
        if len(words) >= 3 and words[1].upper() == "AS":
            stages.add(words[2])
        if image in stages or image == "scratch":
            continue
        assert "$" not in image, f"{image}: unresolved build argument"
        name, _, tag = image.rpartition("/")[2].partition(":")
        assert tag and tag != "latest", f"{image}: pin an explicit tag"
        assert re.search(r"\d+\.\d+\.\d+", tag), f"{image}: tag is not a full x.y.z version"


def test_train_base_matches_tensorflow_2_15_tested_cuda_and_cudnn():
    (image,) = [substitute(rest.split()[0], arg_defaults(TRAIN))
                for word, rest in instructions(TRAIN) if word == "FROM"]
    # tensorflow.org's tested configurations: TF 2.15 <-> CUDA 12.2, cuDNN 8.9.
    assert image.startswith("nvidia/cuda:12.2.")
    assert "-cudnn8-" in image and "-devel-" in image  # devel: nvcc, ptxas for XLA


def test_scripts_under_images_are_executable():
    scripts = [
        p for p in IMAGES.rglob("*")
        if p.is_file() and (p.suffix == ".sh" or p.read_bytes()[:2] == b"#!")
    ]
    assert IMAGES / "train" / "hvdk8s-sshd" in scripts and BENCHMARK in scripts
    for p in scripts:
        assert os.access(p, os.X_OK), f"{p.relative_to(REPO)}: chmod +x"


def test_in_image_shell_scripts_parse():
    sh = shutil.which("sh")
    if sh is None:
        pytest.skip("no sh")
    for p in IMAGES.rglob("*"):
        if p.is_file() and p.read_bytes()[:11] in (b"#!/bin/sh\n", b"#!/bin/bash"):
            subprocess.run([sh, "-n", str(p)], check=True)


def test_the_tag_hashes_exactly_what_the_image_copies():
    # images/build.sh hashes images/inputs.sh's list: an edit to anything else (the README,
    # the test API server) must neither change the tag nor rebuild the image.
    for dockerfile in DOCKERFILES:
        listed = run_script(["bash", str(IMAGES / "inputs.sh"), str(dockerfile.relative_to(REPO))],
                            cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
        copied = [source for sources, _dest, flags in copies(dockerfile) if "from" not in flags
                  for source in sources]
        assert listed == [str(dockerfile.relative_to(REPO)), *copied]
        assert "README.md" not in listed and not any(p.startswith(("kubesim", "tests"))
                                                     for p in listed), listed


# -------------------------------------------------------------------- agreement checks
def test_benchmark_is_copied_where_the_code_expects_it():
    dests = [dest for sources, dest, _ in copies(TRAIN)
             if sources == ["images/benchmark/hvd_cnn_bench.py"]]
    assert dests == [_constant(BENCHMARK, "IN_IMAGE_PATH")]


def test_the_reporting_helper_is_installed_into_site_packages():
    """`import hvdk8s_report` in any rank: moved into the image Python's purelib (not on a
    PYTHONPATH, which ranks started over ssh would not get) and imported at build."""
    (dest,) = [dest for sources, dest, _ in copies(TRAIN)
               if sources == ["images/benchmark/hvdk8s_report.py"]]
    runs = [rest for word, rest in instructions(TRAIN) if word == "RUN"]
    assert any(f"mv {dest}" in run and 'get_paths()["purelib"]' in run
               and "import hvdk8s_report" in run for run in runs)


def test_benchmark_paths_agree_with_the_launcher():
    command = pytest.importorskip("mpijob.k8s.command")
    render = pytest.importorskip("mpijob.k8s.render")
    in_image = _constant(BENCHMARK, "IN_IMAGE_PATH")
    # The ConfigMap key hvdk8s pods run is the same program.
    assert Path(command.BENCHMARK_IN_POD).name == BENCHMARK.name == Path(in_image).name
    # The job's ConfigMap is mounted over CONFIG_DIR: the image's copy must be elsewhere.
    assert not in_image.startswith(render.CONFIG_DIR.rstrip("/") + "/")


def test_local_backend_finds_the_benchmark_in_the_checkout(monkeypatch):
    benchmark_program = pytest.importorskip("launcher.preparing.benchmark_program")
    monkeypatch.delenv("HVDK8S_BENCHMARK", raising=False)
    assert benchmark_program.benchmark_path().resolve() == BENCHMARK.resolve()


def _train_pins(python: str) -> dict[str, str]:
    """The train extra's `name==version` pins that apply under Python 3.N (their markers
    compare python_version only)."""
    pins = {}
    for requirement in _pyproject()["project"]["optional-dependencies"]["train"]:
        m = re.match(r"([\w-]+)==([\w.]+)\s*(?:;\s*python_version\s*([<>=]+)\s*'([\d.]+)')?$",
                     requirement)
        if not m:
            continue
        name, version, op, bound = m.groups()
        key = tuple(map(int, python.split(".")))
        if op is None or {"<": key < tuple(map(int, bound.split("."))),
                          ">=": key >= tuple(map(int, bound.split(".")))}[op]:
            pins[name] = version
    return pins


def test_versions_agree_with_pyproject_and_setup():
    args = arg_defaults(TRAIN)
    pins = _train_pins("3.11")
    assert args["TENSORFLOW_VERSION"] == pins["tensorflow-cpu"]
    assert args["HOROVOD_VERSION"] == pins["horovod"]
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert f"3.10|3.11) TF_VERSION={args['TENSORFLOW_VERSION']};" in setup
    assert f"HOROVOD_VERSION={args['HOROVOD_VERSION']}" in setup


def test_python_3_13_versions_agree_across_setup_pyproject_and_the_trixie_image():
    """Debian 13's Python 3.13 gets one TensorFlow/tf-keras pair everywhere: the setup of a
    machine, the train extra, and images/build.sh's cpu-trixie flavour."""
    pins = _train_pins("3.13")
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert (f"3.12|3.13) TF_VERSION={pins['tensorflow-cpu']}; "
            f"TF_KERAS_VERSION={pins['tf-keras']};") in setup
    build = (IMAGES / "build.sh").read_text()
    assert f'"TENSORFLOW_VERSION={pins["tensorflow-cpu"]}"' in build
    assert f'"TF_KERAS_VERSION={pins["tf-keras"]}"' in build
    # Horovod 0.28.1 is built with GCC 12 where the default is newer, in both.
    assert "HOROVOD_GCC=12" in setup and '"HOROVOD_GCC=12"' in build
    assert "numpy<2" not in " ".join(_pyproject()["project"]["optional-dependencies"]["bench"]
                                     ).replace("numpy<2; python_version < '3.12'", "")


def test_train_image_builds_horovod_with_nccl_mpi_and_gloo():
    runs = " ".join(rest for word, rest in instructions(TRAIN) if word == "RUN")
    for setting in ("HOROVOD_GPU_OPERATIONS=NCCL", "HOROVOD_WITH_TENSORFLOW=1",
                    "HOROVOD_WITH_MPI=1", "HOROVOD_WITH_GLOO=1", "--no-build-isolation",
                    'horovod==${HOROVOD_VERSION}', "${tf}==${TENSORFLOW_VERSION}",
                    "mpi4py==${MPI4PY_VERSION}", "openmpi-bin", "openssh-server",
                    "python-is-python3"):
        assert setting in runs, setting
    for check in ("TensorFlow", "NCCL", "MPI", "Gloo"):
        assert f"'\\[X\\] {check}'" in runs, f"the build must verify {check}"


def test_train_flavours_differ_only_by_build_arguments():
    """One Dockerfile: the GPU flavour by default (its tensorflow and NCCL), the CPU one
    (tensorflow-cpu, no NCCL check) from FLAVOUR=cpu; images/build.sh passes both."""
    assert arg_defaults(TRAIN)["FLAVOUR"] == "gpu"
    runs = " ".join(rest for word, rest in instructions(TRAIN) if word == "RUN")
    assert 'tf=tensorflow; [ "${FLAVOUR}" = gpu ] || tf=tensorflow-cpu' in runs
    assert "{ [ \"${FLAVOUR}\" != gpu ] || grep -Eq '\\[X\\] NCCL'" in runs
    build = (IMAGES / "build.sh").read_text()
    # cpu-trixie is the cpu flavour on another base, with its own build arguments.
    assert '--build-arg "FLAVOUR=${flavour%%-*}"' in build and '"BASE_IMAGE=$base"' in build


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_images_install_the_hvdk8s_package(dockerfile):
    project = _pyproject()
    sources = {s for srcs, _, flags in copies(dockerfile) if "from" not in flags for s in srcs}
    assert "pyproject.toml" in sources
    # setuptools needs the readme to build: the RUN that installs writes a stub of it, so an
    # edit of the project's README rebuilds no image.
    readme = project["project"]["readme"]
    assert readme not in sources
    install = next(rest for word, rest in instructions(dockerfile)
                   if word == "RUN" and "pip install" in rest and "hvdk8s" in rest)
    assert install.index(f"> {readme}") < install.index("pip install")
    # What runs in a rank or the agent; the test API server (kubesim, for `dev cluster`) not.
    for pattern in project["tool"]["setuptools"]["packages"]["find"]["include"]:
        package = pattern.rstrip("*")
        assert (package in sources) == (package != "kubesim"), f"package {package}"
    assert "hvdk8s" in project["project"]["scripts"]


def test_agent_image_runs_the_agent():
    assert exec_form(AGENT, "ENTRYPOINT") == ["hvdk8s", "agent"]
    runs = " ".join(rest for word, rest in instructions(AGENT) if word == "RUN")
    assert '".[agent]"' in runs
    assert "agent" in _pyproject()["project"]["optional-dependencies"]


def test_train_image_user_and_ssh_files():
    args = arg_defaults(TRAIN)
    assert args["RUN_AS"] == "root" and args["MPI_USER"] == "mpiuser"
    assert args["MPI_UID"] == "1000"
    users = [rest for word, rest in instructions(TRAIN) if word == "USER"]
    assert users[-1] == "${RUN_AS}"
    dest = {srcs[0]: d for srcs, d, _ in copies(TRAIN)}
    assert dest["images/train/sshd_config"] == "/etc/ssh/sshd_config"
    # Ubuntu's ssh_config includes /etc/ssh/ssh_config.d/*.conf only.
    assert re.fullmatch(r"/etc/ssh/ssh_config\.d/[\w-]+\.conf", dest["images/train/ssh_config"])
    assert dest["images/train/hvdk8s-sshd"].startswith("/usr/local/bin/")


def test_ssh_settings_agree_with_each_other_and_the_job_spec():
    sshd = IMAGES / "train" / "sshd_config"
    client = IMAGES / "train" / "ssh_config"
    (port,) = _directive(sshd, "Port")
    assert _directive(client, "Port") == [port]
    spec = pytest.importorskip("mpijob.jobspec.spec")
    assert int(port) == spec.JobSpec.model_fields["ssh_port"].default
    assert _directive(sshd, "PasswordAuthentication") == ["no"]
    assert _directive(sshd, "UsePAM") == ["no"]
    assert _directive(sshd, "PidFile") == ["none"]  # writable by a non-root sshd
    assert _directive(client, "StrictHostKeyChecking") == ["no"]
    assert _directive(client, "UserKnownHostsFile") == ["/dev/null"]
    # Every HostKey the config names is one `ssh-keygen -A` makes in the image.
    for key in _directive(sshd, "HostKey"):
        assert re.fullmatch(r"/etc/ssh/ssh_host_(ed25519|ecdsa|rsa)_key", key)


def test_sshd_script_reads_the_secret_hvdk8s_mounts():
    render = pytest.importorskip("mpijob.k8s.render")
    script = (IMAGES / "train" / "hvdk8s-sshd").read_text()
    assert f'HVDK8S_SSH_DIR:-{render.SSH_DIR}}}' in script
    # kubernetes.io/ssh-auth keys, as mpijob's Secret has them.
    assert "ssh-privatekey" in script and "ssh-publickey" in script
