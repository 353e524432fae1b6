"""The algorithms rlfit knows: one line each. `rlfit.algos.<name>` holds the algorithm's folder.

Each folder has `config.py` (pure Python: `SECTION`, the frozen dataclass of its config section named like the
algorithm; `PRESETS`; `published(env_name)`, MuJoCo Playground's settings as a config layer) and
`algorithm.py` (`ALGORITHM`, an `rlfit.algos.contract.Algorithm`; imports JAX), which `rlfit.algos.registry.algorithm`
loads by name.
"""

from __future__ import annotations

import importlib
from types import ModuleType

ALGORITHMS = {
    "ppo": "rlfit.algos.ppo",
    "sac": "rlfit.algos.sac",
}
DEFAULT_ALGORITHM = "ppo"


def config_module(name: str) -> ModuleType:
    """The algorithm's `config` module (its section, presets and published settings)."""
    return importlib.import_module(f"{ALGORITHMS[name]}.config")
