"""Fit the run to the hardware: predict memory, choose sizes that fit, recognise out-of-memory. Pure decisions
on numbers; measuring the step (bounded from its lowered program or compiled) and calling the planner is
`rlfit.run.sizing`:

    rlfit.run.sizing.plan_for(config, device_memory=None, auto_num_envs=False) -> (Config, Plan)
    is_out_of_memory(error) -> bool   (the back-off's next sizes are the algorithm's: Algorithm.smaller_sizes)
"""

from rlfit.planning.backoff import is_out_of_memory
from rlfit.algos.contract import Candidate
from rlfit.planning.planner import MemoryPlan, check_precision

__all__ = ["Candidate", "MemoryPlan", "check_precision", "is_out_of_memory"]
