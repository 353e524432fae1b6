"""How the memory planner sizes SAC: the largest replay buffer, up to the config's, that fits, with `num_envs` and
`batch_size` the config's (`rlfit.algos.offpolicy.memory_rules`); the smallest buffer holds 2 policy steps. Pure
Python."""

from __future__ import annotations

from rlfit.algos.offpolicy.memory_rules import replay_memory_rules, two_rows

MEMORY_RULES = replay_memory_rules("sac", two_rows)
