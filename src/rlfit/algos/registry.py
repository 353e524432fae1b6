"""An algorithm's contract by name (`rlfit.config.algorithms.ALGORITHMS` lists the names and their folders)."""

from __future__ import annotations

import importlib

from rlfit.algos.contract import Algorithm
from rlfit.config.algorithms import ALGORITHMS


def algorithm(name: str) -> Algorithm:
    """The algorithm's contract (imports JAX and the algorithm's code)."""
    return importlib.import_module(f"{ALGORITHMS[name]}.algorithm").ALGORITHM
