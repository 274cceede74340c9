"""Per-user defaults of `submit mpi`: flag > environment > config file > built-in, option
by option; the config file's errors; `config view` and `config set`."""

from __future__ import annotations

import json
from typing import Literal, get_args, get_origin

import pytest
import yaml
from typer.testing import CliRunner

from launcher.cli import userdefaults
from launcher.cli.app import app
from launcher.cli.config import _submit_command

runner = CliRunner()
COMMAND = _submit_command()
PARAMS = {p.name: p for p in userdefaults.configurable(COMMAND)}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch, tmp_path):
    monkeypatch.setenv("HVDK8S_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HVDK8S_CONFIG", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    for p in PARAMS.values():
        monkeypatch.delenv(userdefaults.env_name(p), raising=False)


def _samples(param):
    """Three values, each unlike the one before it and the first unlike the default:
    (config, environment, flag), as YAML, env text and command-line text."""
    ann = param.type_descriptor.annotation
    if get_origin(ann) is Literal:
        choices = [c for c in get_args(ann)]
        a = next(c for c in choices if c != param.default)
        b = next(c for c in choices if c != a)
        c = next(c for c in choices if c != b)
        return (a, a), (b, b), (c, c)
    if ann is int:
        return (3, 3), ("4", 4), ("5", 5)
    if ann is float:
        return (3.5, 3.5), ("4.5", 4.5), ("5.5", 5.5)
    if param.multiple:
        return (["a=1"], ["a=1"]), ("b=2", ["b=2"]), ("c=3", ["c=3"])
    return ("from-config", "from-config"), ("from-env", "from-env"), ("from-flag", "from-flag")


def _parse(args, monkeypatch, env=None):
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    ctx = COMMAND.make_context("mpi", list(args))
    return ctx.params


def _long(param):
    return max(param.opts, key=len)


def _norm(value):
    return list(value) if isinstance(value, (list, tuple)) else value


def _default(param):
    return [] if param.multiple and param.default is None else _norm(param.default)


@pytest.mark.parametrize("name", sorted(n for n, p in PARAMS.items() if not p.is_flag))
def test_precedence_option_by_option(name, tmp_path, monkeypatch):
    param = PARAMS[name]
    (cfg, cfg_v), (env, env_v), (flag, flag_v) = _samples(param)
    key, envvar = userdefaults.key_of(param), userdefaults.env_name(param)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({key: cfg}))
    base = ["--config", str(config)]
    assert _norm(_parse([], monkeypatch)[name]) == _default(param)  # built-in
    assert _norm(_parse(base, monkeypatch)[name]) == cfg_v  # config beats built-in
    assert _norm(_parse(base, monkeypatch, {envvar: env})[name]) == env_v  # env beats config
    got = _parse([*base, _long(param), str(flag)], monkeypatch, {envvar: env})
    assert _norm(got[name]) == flag_v  # the flag beats everything


@pytest.mark.parametrize("name", sorted(n for n, p in PARAMS.items() if p.is_flag))
def test_precedence_of_switches(name, tmp_path, monkeypatch):
    param = PARAMS[name]
    key, envvar = userdefaults.key_of(param), userdefaults.env_name(param)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({key: True}))
    base = ["--config", str(config)]
    assert _parse([], monkeypatch)[name] is False
    assert _parse(base, monkeypatch)[name] is True
    assert _parse(base, monkeypatch, {envvar: "false"})[name] is False
    assert _parse([*base, _long(param)], monkeypatch, {envvar: "false"})[name] is True


def _kubeconfig(tmp_path, monkeypatch, current="prod"):
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config",
                                    "current-context": current,
                                    "contexts": [{"name": current, "context": {"cluster": "c"}}]}))
    monkeypatch.setenv("KUBECONFIG", str(path))


def test_the_current_contexts_section_wins_over_the_top_level(tmp_path, monkeypatch):
    _kubeconfig(tmp_path, monkeypatch)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"queue": "default-q",
                                      "contexts": {"prod": {"queue": "prod-q"},
                                                   "dev": {"queue": "dev-q"}}}))
    assert _parse(["--config", str(config)], monkeypatch)["queue"] == "prod-q"
    assert _parse(["--config", str(config), "--context", "dev"], monkeypatch)["queue"] == "dev-q"
    assert _parse(["--config", str(config), "--context", "x"], monkeypatch)["queue"] == "default-q"


def _home_config(tmp_path, data):
    path = tmp_path / "home" / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data) if isinstance(data, dict) else data)
    return path


def test_done_when_image_and_namespace_from_the_config_file(tmp_path):
    path = _home_config(tmp_path, {"image": "registry.example.com/train:1",
                                   "namespace": "team-a"})
    result = runner.invoke(app, ["submit", "mpi", "--workers", "4", "--gpus", "1", "--dry-run",
                                 "-o", "json"])
    assert result.exit_code == 0, result.output
    objects = json.loads(result.stdout)["items"]
    assert {o["metadata"]["namespace"] for o in objects} == {"team-a"}
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert pods and {c["image"] for p in pods for c in p["spec"]["containers"]} == {
        "registry.example.com/train:1"}
    view = runner.invoke(app, ["config", "view"], env={"HVDK8S_NAMESPACE": "team-b"})
    assert view.exit_code == 0, view.output
    rows = {line.split()[0]: line.split(None, 2)[1:] for line in view.output.splitlines()[2:]}
    assert rows["image"] == ["registry.example.com/train:1", f"config {path}"]
    assert rows["namespace"] == ["team-b", "env HVDK8S_NAMESPACE"]


@pytest.mark.parametrize("content, message", [
    ({"workers": "four"}, "key workers: "),
    ({"image-pull-policy": "Sometimes"}, "key image-pull-policy: expected Always, IfNotPresent, Never"),
    ({"colour": "red"}, "unknown key 'colour'"),
    ({"contexts": {"prod": {"gang": "maybe"}}}, "(contexts.prod): key gang: "),
    ({"contexts": ["prod"]}, "key contexts: expected a mapping"),
    ("image: [unclosed", "not valid YAML at line"),
    ("- a list", "expected a mapping of option names"),
])
def test_config_errors_name_the_file_the_key_and_what_is_expected(tmp_path, monkeypatch,
                                                                   content, message):
    _kubeconfig(tmp_path, monkeypatch)
    path = _home_config(tmp_path, content)
    result = runner.invoke(app, ["submit", "mpi", "--dry-run"])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"error: config {path}") and message in line, line


def test_a_named_config_file_must_exist(tmp_path):
    result = runner.invoke(app, ["submit", "mpi", "--config", str(tmp_path / "nope.yaml"),
                                 "--dry-run"])
    assert result.exit_code == 2 and "no such file" in result.output


def test_config_set_writes_keeps_the_rest_and_refuses_bad_input(tmp_path):
    path = _home_config(tmp_path, {"image": "a/b:1", "contexts": {"prod": {"queue": "q"}}})
    ok = runner.invoke(app, ["config", "set", "image-pull-secret", "regcred,other",
                             "--context", "prod"])
    assert ok.exit_code == 0, ok.output
    assert runner.invoke(app, ["config", "set", "gang", "true"]).exit_code == 0
    assert yaml.safe_load(path.read_text()) == {
        "image": "a/b:1", "gang": True,
        "contexts": {"prod": {"queue": "q", "image-pull-secret": ["regcred", "other"]}}}
    before = path.read_text()
    for args, message in ((["colour", "red"], "unknown key 'colour'"),
                          (["mpi", "lam"], "key mpi: expected"),
                          (["batch-size", "big"], "key batch-size: ")):
        bad = runner.invoke(app, ["config", "set", *args])
        assert bad.exit_code == 2 and message in bad.output, bad.output
        assert len(bad.output.strip().splitlines()) == 1
    assert path.read_text() == before  # nothing written on a bad key or value
