"""How the memory planner sizes FastTD3: as SAC, the largest replay buffer up to the config's that fits, with
`num_envs` and `batch_size` the config's (`rlfit.algos.offpolicy.memory_rules`); the smallest buffer holds
n_step + 2 policy steps (a complete n-step window and its successor). Pure Python."""

from __future__ import annotations

from rlfit.algos.fasttd3.config import FastTD3Config
from rlfit.algos.offpolicy.memory_rules import replay_memory_rules

def fewest_rows(settings: FastTD3Config) -> int:
    """The fewest policy steps FastTD3's buffer may hold: an n-step window and two more."""
    return settings.n_step + 2


MEMORY_RULES = replay_memory_rules("fasttd3", fewest_rows)
