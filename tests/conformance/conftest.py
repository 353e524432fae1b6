"""The algorithms every conformance test runs for, the test-only one registered, and their shared helpers.

`ALGORITHM_NAMES` is rlfit's registry (`rlfit.algos.registry.ALGORITHMS`: PPO, SAC, FastTD3, and any added there
later) followed by the test-only `detpg` (tests/algos/detpg), registered for each conformance module in this process
and, through $RLFIT_ALGORITHMS, in the processes a test starts (a signalled run, `python -m rlfit`)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from rlfit.algos.registry import ALGORITHMS, ENVIRONMENT_VARIABLE, register_algorithm, unregister_algorithm

TEST_ONLY = {"detpg": "tests.algos.detpg"}
"""Algorithms defined only in the tests, by name: their package."""
ALGORITHM_NAMES = (*(name for name in ALGORITHMS if name not in TEST_ONLY), *TEST_ONLY)


@pytest.fixture(scope="module", autouse=True)
def test_only_algorithms():
    """Registers TEST_ONLY here and for subprocesses for one module; restores the registry and $RLFIT_ALGORITHMS."""
    before = os.environ.get(ENVIRONMENT_VARIABLE)
    for name, package in TEST_ONLY.items():
        register_algorithm(name, package)
    os.environ[ENVIRONMENT_VARIABLE] = ",".join([*filter(None, [before]), *(f"{n}={p}" for n, p in TEST_ONLY.items())])
    yield
    for name in TEST_ONLY:
        unregister_algorithm(name)
    if before is None:
        os.environ.pop(ENVIRONMENT_VARIABLE, None)
    else:
        os.environ[ENVIRONMENT_VARIABLE] = before


def config_fields(algo: str) -> set[str]:
    """The names of the settings in the algorithm's config section (e.g. {'num_envs', 'max_replay_size', ...})."""
    from rlfit.algos.registry import config_module

    return {field.name for field in dataclasses.fields(config_module(algo).SECTION)}


def has_replay(algo: str) -> bool:
    """Whether the algorithm keeps a replay buffer (and so checkpoints it): SAC and FastTD3."""
    return "max_replay_size" in config_fields(algo)


def checkpoint_arrays(run_dir: Path, iteration: int) -> list[dict]:
    """Shape, dtype and SHA-256 of every array of a checkpoint (its meta.json)."""
    import json

    return json.loads((run_dir / "checkpoints" / f"{iteration:08d}" / "meta.json").read_text())["arrays"]
