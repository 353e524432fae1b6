"""Fit the run to the hardware: predict memory, choose sizes that fit, recognise out-of-memory.

    plan_for(config, device_memory=None, auto_num_envs=False) -> (Config, Plan)
    is_out_of_memory(error) -> bool   (the back-off's next sizes are the algorithm's: Algorithm.smaller_sizes)
"""

from rlfit.planning.backoff import is_out_of_memory
from rlfit.planning.planner import Candidate, MemoryPlan, check_precision, memory_plan, plan_for
from rlfit.planning.units import format_bytes, parse_size

__all__ = ["Candidate", "MemoryPlan", "check_precision", "format_bytes", "is_out_of_memory", "memory_plan",
           "parse_size", "plan_for"]
