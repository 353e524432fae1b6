"""How the memory planner sizes FastTD3: as SAC, the largest replay buffer up to the config's that fits, with
`num_envs` and `batch_size` the config's (`rlfit.algos.offpolicy.memory_rules`); the smallest buffer holds
n_step + 2 policy steps (a complete n-step window and its successor). Pure Python."""

from __future__ import annotations

from rlfit.algos.offpolicy.memory_rules import replay_memory_rules

MEMORY_RULES = replay_memory_rules("fasttd3", lambda settings: settings.n_step + 2)
