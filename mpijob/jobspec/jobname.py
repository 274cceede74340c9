"""Names for jobs submitted without `--name`: what runs, plus a short random suffix.

`resnet50-x7k2p` for the benchmark, `train-bq4zd` for `python train.py`: readable in `list`,
a DNS-1035 label, short enough for every derived object name (`mpijob.jobspec.names`), and not one
of the names already taken in the namespace.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Collection, Iterable

from mpijob.jobspec import names
from mpijob.jobspec.launch_line import LAUNCHER_PROGRAMS

# Kubernetes' generateName alphabet and length: no vowels (no words by accident), no
# look-alikes such as 0/o, 1/l (k8s.io/apimachinery pkg/util/rand/rand.go, `alphanums`;
# the API server's names.SimpleNameGenerator appends 5 of them).
SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
SUFFIX_LENGTH = 5
FALLBACK_BASE = "job"
# Words of a command that say how it runs, not what: skipped when naming the job.
_RUNNERS = frozenset({"python", "python3", "python2", "sh", "bash", "env", "exec", "nohup",
                      "time", "numactl", "taskset", "stdbuf"}) | LAUNCHER_PROGRAMS


def sanitize(word: str) -> str:
    """The DNS-1035 label closest to `word`: lower case, runs of other characters as one
    '-', starting with a letter; '' when nothing is left."""
    text = re.sub(r"[^a-z0-9]+", "-", word.lower())
    text = re.sub(r"^[^a-z]+", "", text)
    return text.strip("-")


def base_name(model: str, command: tuple[str, ...] = (), shell: bool = False) -> str:
    """The readable part: the benchmark's model, or the program a command runs."""
    if not command:
        return sanitize(model) or FALLBACK_BASE
    try:
        words = shlex.split(command[0]) if shell else list(command)
    except ValueError:  # unbalanced quotes: the command is the user's problem, not the name's
        words = command[0].split()
    interpreter = None
    for i, word in enumerate(words):
        if interpreter and word == "-m" and i + 1 < len(words):  # python -m pkg.module
            candidate = sanitize(words[i + 1].rpartition(".")[2])
            if candidate:
                return candidate
        if interpreter and word == "-c":  # inline code is no name: the program is python
            return sanitize(interpreter) or FALLBACK_BASE
        if word.startswith("-") or "=" in word or any(c.isspace() for c in word):
            continue
        stem = posixpath.basename(word)
        if re.fullmatch(r"python[0-9.]*", stem) or stem in _RUNNERS:
            interpreter = interpreter or stem
            continue
        candidate = sanitize(posixpath.splitext(stem)[0])
        if candidate:
            return candidate
    return FALLBACK_BASE


def generate(base: str, workers: int, taken: Collection[str], suffixes: Iterable[str]) -> str:
    """`base-SUFFIX` with the first suffix whose name is not taken, cut so that the longest
    derived object name of a job with `workers` workers stays within 63 characters."""
    limit = 63 - names.longest_suffix(workers) - 1 - SUFFIX_LENGTH
    base = (sanitize(base) or FALLBACK_BASE)[:limit].rstrip("-")
    for suffix in suffixes:
        name = f"{base}-{suffix}"
        if name not in taken:
            return name
    raise ValueError("no free name among the suffixes given")
