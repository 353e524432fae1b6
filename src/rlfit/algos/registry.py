"""The algorithms rlfit knows: one line each. `rlfit.algos.<name>` holds the algorithm's folder.

Each folder has `config.py` (pure Python: `SECTION`, the frozen dataclass of its config section named like the
algorithm; `PRESETS`; `published(env_name)`, MuJoCo Playground's settings as a config layer) and
`algorithm.py` (`ALGORITHM`, an `rlfit.algos.contract.Algorithm`; imports JAX).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rlfit.algos.contract import Algorithm

ALGORITHMS = {
    "ppo": "rlfit.algos.ppo",
    "sac": "rlfit.algos.sac",
    "fasttd3": "rlfit.algos.fasttd3",
}
DEFAULT_ALGORITHM = "ppo"


def config_module(name: str) -> ModuleType:
    """The algorithm's `config` module (its section, presets and published settings)."""
    return importlib.import_module(f"{ALGORITHMS[name]}.config")


def algorithm(name: str) -> Algorithm:
    """The algorithm's contract (imports JAX and the algorithm's code)."""
    return importlib.import_module(f"{ALGORITHMS[name]}.algorithm").ALGORITHM
