"""Reading an experiment file: YAML in, a validated `Experiment` out, or one line naming
the file, the key and what is expected (exit 2). When that line cannot hold every problem,
each one follows on a line of its own, `FILE: key: what is expected`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from launcher.errors import UsageError
from launcher.formats import yaml_errors
from mpijob.jobspec.experiment_matrix import (
    Experiment,
    ExperimentError,
    Run,
    expand,
    parse_experiment,
)

# More problems than this make the summary line unreadable; the rest follow it, one a line.
MAX_PROBLEMS_SHOWN = 3


@dataclass(frozen=True)
class LoadedExperiment:
    experiment: Experiment
    path: Path
    cluster: Path | None  # resolved against the experiment file's folder

    @property
    def runs(self) -> list[Run]:
        return expand(self.experiment)


def _strict_loader():
    class StrictLoader(yaml.SafeLoader):
        """Refuses a key given twice: YAML would silently keep the last one."""

    def construct_mapping(loader, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice", key_node.start_mark)
            seen.add(key)
        return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return StrictLoader


def read_yaml(path: Path):
    loader = _strict_loader()
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such experiment file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory; expected an experiment file (YAML)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read: {exc}") from None
    return yaml_errors.load(text, str(path), loader)


def format_problems(path: Path, err: ExperimentError) -> str:
    def one(key: str, message: str) -> str:
        return f"{key}: {message}" if key else message

    shown = err.problems[:MAX_PROBLEMS_SHOWN]
    text = "; ".join(one(key, message) for key, message in shown)
    more = len(err.problems) - len(shown)
    if more <= 0:
        return f"{path}: {text}"
    every = "".join(f"\n{path}: {one(key, message)}" for key, message in err.problems)
    return f"{path}: {text} (and {more} more, all listed below){every}"


def load_experiment(path: str | Path) -> LoadedExperiment:
    path = Path(path)
    try:
        experiment = parse_experiment(read_yaml(path))
    except ExperimentError as err:
        raise UsageError(format_problems(path, err)) from None
    cluster = None
    if experiment.cluster is not None:
        cluster = Path(experiment.cluster).expanduser()
        if not cluster.is_absolute():
            cluster = path.parent / cluster
        if not cluster.is_file():
            raise UsageError(f"{path}: cluster: no such file {str(cluster)!r}; expected "
                             "the path of a cluster file, relative to the experiment file")
    return LoadedExperiment(experiment, path, cluster)
