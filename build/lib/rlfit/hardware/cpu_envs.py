"""How many environments a CPU steps usefully: past about CPU_ENVS_PER_CORE per core a larger batch steps no
faster, so the planner's `num_envs auto` stops at `cpu_max_num_envs(cores)` on a CPU."""

from __future__ import annotations

CPU_ENVS_PER_CORE = 256
"""On the CPU backend memory rarely limits, and past about this many environments per core a larger batch
steps no faster (2 cores: 512 envs 244k env-steps/s, 1024 envs 208k, 8192 envs 169k;
`benchmarks/planner_sweep.py`), so auto stops at `cpu_max_num_envs(cores)`."""
CPU_CAP_RANGE = (256, 8192)


def cpu_max_num_envs(cores: int) -> int:
    """The most environments `auto` picks on a CPU with `cores` cores: CPU_ENVS_PER_CORE per core, rounded
    down to a power of two, within CPU_CAP_RANGE (1 core: 256, 2: 512, 4: 1024, 32 or more: 8192)."""
    low, high = CPU_CAP_RANGE
    target = max(low, min(high, CPU_ENVS_PER_CORE * max(cores, 1)))
    return 1 << (target.bit_length() - 1)
