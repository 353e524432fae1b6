"""The benchmark registry's types: a benchmark (one runnable script), the results JSON it reads its figures from,
a figure, and where a figure comes from. Pure data: no JAX, no rlfit."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple


class Figure(NamedTuple):
    """One figure a JSON backs: what is claimed, its value (as the README writes it) and its unit."""

    claim: str
    value: str
    unit: str
    origin: dict | None = None
    """The part of the record this figure comes from where it has its own command and date (one run of several)."""


class Provenance(NamedTuple):
    """Where a figure comes from: the JSON's command, date, commit, the machine it ran on and its load."""

    command: str
    date: str
    commit: str
    device: str
    load: str


class Source(NamedTuple):
    """A results JSON (a path under results/, or a glob whose newest file by `date` counts) and its extractor."""

    pattern: str
    extract: Callable[[dict], list[Figure]]


class Benchmark(NamedTuple):
    """One runnable script: `python benchmarks/{name}.py` (`python -m benchmarks run {name}`)."""

    name: str
    category: str
    measures: str
    backs: tuple[str, ...]
    """The documentation that quotes its figures: docs pages (and sections), README sections."""
    device: str
    """cpu, gpu or any."""
    minutes: str
    """A full run on the 2-core CPU, from the README's measured figures, or "not measured"."""
    section: str
    """Its method page: a path under benchmarks/ (`methods/NAME.md`), with `#anchor` where the method is a section
    of a page it shares."""
    sources: tuple[Source, ...] = ()
    quick: str = "--quick"
    """The arguments of its short check, or "" where it has none (`quick_exempt` says why)."""
    quick_exempt: str = ""
    quick_seconds: str = "not measured"
    """One run of the short check on the 2-core CPU, measured (`/usr/bin/time`), with the load it ran at."""
    one_off: str = ""
    """Set for a one-off investigation: the question it answered (it stays runnable for its decision record)."""
    needs: str = ""
    """What it needs beyond rlfit's environment: "torch", or a path such as benchmarks/.venv-brax (Brax's venv)."""
