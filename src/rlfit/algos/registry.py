"""An algorithm's contract by name; the names, `register_algorithm` and `RLFIT_ALGORITHMS` live in
`rlfit.config.algorithms` (the config reads them), re-exported here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, overload

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
    from rlfit.algos.contract import Algorithm, SomeAlgorithm, Variables
    from rlfit.algos.fasttd3.step import FastTD3Metrics, FastTD3State
    from rlfit.algos.offpolicy.sizes import ReplaySizes
    from rlfit.algos.ppo.sizes import BatchSizes
    from rlfit.algos.ppo.step import IterationMetrics, TrainState as PPOState
    from rlfit.algos.sac.step import SACMetrics, SACState

    PPOAlgorithm = Algorithm[BatchSizes, PPOState, IterationMetrics, Variables]
    SACAlgorithm = Algorithm[ReplaySizes, SACState, SACMetrics, Variables]
    FastTD3Algorithm = Algorithm[ReplaySizes, FastTD3State, FastTD3Metrics, Variables]

__all__ = ["ALGORITHMS", "DEFAULT_ALGORITHM", "ENVIRONMENT_VARIABLE", "RESERVED", "algorithm", "config_module",
           "register_algorithm", "register_from_environment", "unregister_algorithm"]


# A literal name is also a `str`: mypy calls the overloads overlapping; the narrower one, listed first, wins.
@overload
def algorithm(name: Literal["ppo"]) -> PPOAlgorithm: ...  # type: ignore[overload-overlap]  # also a str
@overload
def algorithm(name: Literal["sac"]) -> SACAlgorithm: ...  # type: ignore[overload-overlap]  # also a str
@overload
def algorithm(name: Literal["fasttd3"]) -> FastTD3Algorithm: ...  # type: ignore[overload-overlap]  # also a str
@overload
def algorithm(name: str) -> SomeAlgorithm: ...


def algorithm(name: str) -> object:
    """The algorithm's contract (imports JAX and the algorithm's code). A built-in algorithm named as a literal comes
    with its own state, metrics and sizes types; a name known only at run time (a config's `algo`) gives
    `SomeAlgorithm`, those types erased to the contract's protocols."""
    return algorithm_module(name, "algorithm").ALGORITHM
