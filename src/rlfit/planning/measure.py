"""What the planner needs from the code that can build and compile the training step, and nothing more.

    measurer.bound(config, sizes) -> MemoryPoint | None        # read from the lowered step: no compile
    measurer.analyze(config, probes, as_training) -> points   # XLA's analysis of the compiled step at each size
    measurer.env                                               # the environment it loaded (None: none yet)

`rlfit.run.probes.StepProbes` is the one rlfit hands in (planning cannot import `rlfit.run`, which builds the
learner); the planner decides which measure to ask for and what it means (`rlfit.planning.deciding`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from rlfit.algos.contract import Sizes
from rlfit.config.schema import Config
from rlfit.planning.memory import MemoryPoint


class StepMeasurer(Protocol):
    """Measures the training step of a config at given sizes without running it (`rlfit.run.probes.StepProbes`).
    It loads the environment once, on its first measure, and keeps it (`env`) for training to build on."""

    say: Callable[[str], None] | None
    """Hears what the planner decides and the measurer compiles (a console's line printer), or None."""

    @property
    def env(self) -> Any | None:
        """The environment loaded for measuring (None where nothing was measured)."""

    def bound(self, config: Config, sizes: Sizes) -> MemoryPoint | None:
        """An upper bound of the step's memory at `sizes`, read from its lowered program (traced, not compiled);
        None where the program holds a value of no static size. The lowered program is kept for a compile of the
        same sizes that may follow."""

    def analyze(self, config: Config, probes: Sequence[Sizes], as_training: Sizes | None = None
                ) -> tuple[MemoryPoint, ...]:
        """XLA's memory analysis of the step compiled at each of `probes` (in order); the one at `as_training`
        compiled with training's own options, so that training reuses it from the compile cache."""


def described(config: Config, sizes: Sizes) -> str:
    """`num_envs=512`, and the transitions stored at `sizes` where the algorithm stores any
    (`MemoryRules.stored_transitions`)."""
    from rlfit.algos.registry import algorithm

    stored = algorithm(config.algo).memory.stored_transitions(sizes)
    return f"num_envs={sizes.num_envs}" + (f" storing {stored:,} transitions" if stored else "")
