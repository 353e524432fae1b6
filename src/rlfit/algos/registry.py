"""An algorithm's contract by name; the names, `register_algorithm` and `RLFIT_ALGORITHMS` live in
`rlfit.config.algorithms` (the config reads them), re-exported here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlfit.config.algorithms import (
    ALGORITHMS,
    DEFAULT_ALGORITHM,
    ENVIRONMENT_VARIABLE,
    RESERVED,
    algorithm_module,
    config_module,
    register_algorithm,
    register_from_environment,
    unregister_algorithm,
)

if TYPE_CHECKING:
    from rlfit.algos.contract import Algorithm

__all__ = ["ALGORITHMS", "DEFAULT_ALGORITHM", "ENVIRONMENT_VARIABLE", "RESERVED", "algorithm", "config_module",
           "register_algorithm", "register_from_environment", "unregister_algorithm"]


def algorithm(name: str) -> Algorithm:
    """The algorithm's contract (imports JAX and the algorithm's code)."""
    return algorithm_module(name, "algorithm").ALGORITHM
