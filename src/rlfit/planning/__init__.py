"""Fit the run to the hardware: predict memory, choose sizes that fit, recognise out-of-memory. Planning owns the
whole decision (the budget, the bound, the single compile, the probes, the line, the choice); `rlfit.run` hands it
the one thing it cannot do itself, a measurer of the training step (`rlfit.run.probes.StepProbes`, the
`rlfit.planning.measure.StepMeasurer` protocol), which loads the environment once and passes it on:

    rlfit.planning.device_plan.plan_for(config, measurer, device_memory=None, auto_num_envs=False)
        -> Planned(config, plan, env)
    is_out_of_memory(error) -> bool   (the back-off's next sizes are the algorithm's: Algorithm.smaller_sizes)

One module per job, each importing only those below it (a contract in pyproject.toml): `device_plan` (the plan
for a device: its precision, devices, encoder and budget, the Plan), `measure` (how the step is measured: which
measure decides), `fit` (what fits a memory model and a budget), `memory_model`, `budget` and `plan` (the Plan
a run records); beside them `preset` (which preset, by device), `out_of_memory` (recognising the error; the
back-off itself is `rlfit.run.recover`'s) and `seed_groups` (seeds per program).
"""

from rlfit.planning.out_of_memory import is_out_of_memory
from rlfit.algos.contract import Candidate
from rlfit.planning.device_plan import check_precision
from rlfit.planning.fit import MemoryPlan

__all__ = ["Candidate", "MemoryPlan", "check_precision", "is_out_of_memory"]
