"""What the host loop steps: the compiled programs of its lanes, one seed's (`OneSeed`, the Trainer's own programs)
or several seeds' in one vmapped program (`rlfit.run.seed_group.SeedGroup`). The loop (`rlfit.run.loop`) sees only
this protocol, so a single run and a seed group run through the same loop; a lane's share of a state, of metrics or
of an evaluation is `stepper.lane(tree, index)`.

    state, record = stepper.starting_state(say, total)    # every lane's fresh state (stacked for a group)
    compiled = stepper.programs(state, say, total)         # `rlfit.run.trainer.Compiled`
    state, metrics = compiled.iteration(state)             # one iteration of every lane
    result = stepper.evaluate_lanes(compiled, state, iteration)  # every lane's EvalMetrics
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Generic, Protocol

import jax

from rlfit.algos.contract import StateT, TreeT
from rlfit.hardware.compile_log import ProgramCompile
from rlfit.run.evaluate import EvalMetrics, eval_key
from rlfit.run.trainer import Compiled, Trainer


class Stepper(Protocol[StateT]):
    """The compiled programs of a loop's lanes (their number: `len(seeds)`)."""

    trainer: Trainer[StateT]
    """The trainer whose plan (sizes, iterations) and `run` section the lanes share; lane i's seed is `seeds[i]`."""

    @property
    def seeds(self) -> tuple[int, ...]: ...

    def starting_state(self, say: Callable[[str], None] | None, total: int) -> tuple[StateT, ProgramCompile | None]:
        """Every lane's fresh state and the starting state's compile (None when none was recorded)."""
        ...

    def programs(self, state: StateT | None, say: Callable[[str], None] | None, total: int) -> Compiled[StateT]:
        """The training step and evaluation for `state`'s shapes (the abstract state's when None)."""
        ...

    def place(self, state: StateT) -> StateT:
        """`state` laid out where the programs expect it."""
        ...

    def abstract_of(self, state: StateT) -> StateT:
        """`state`'s shapes, dtypes and shardings, as `Compiled.abstract` records them."""
        ...

    def evaluate_lanes(self, compiled: Compiled[StateT], state: StateT, iteration: int) -> EvalMetrics:
        """Every lane's evaluation at `iteration` with its seed's key (`eval_key`); waits for the program."""
        ...

    def lane(self, tree: TreeT, index: int) -> TreeT:
        """Lane `index`'s part of a state, of metrics or of an evaluation."""
        ...

    def stack(self, trees: Sequence[StateT]) -> StateT:
        """The lanes' states as one (the inverse of `lane`)."""
        ...

    def rebuilt(self, trainer: Trainer[StateT]) -> Stepper[StateT]:
        """The same lanes on another trainer (an out-of-memory back-off's smaller sizes)."""
        ...


@dataclasses.dataclass
class OneSeed(Generic[StateT]):
    """One lane: the Trainer's own programs (unbatched, laid out over the run's devices), as a single run trains."""

    trainer: Trainer[StateT]

    @property
    def seeds(self) -> tuple[int, ...]:
        return (self.trainer.config.run.seed,)

    def starting_state(self, say: Callable[[str], None] | None, total: int) -> tuple[StateT, ProgramCompile | None]:
        return self.trainer.starting_state(say=say, total=total)

    def programs(self, state: StateT | None, say: Callable[[str], None] | None, total: int) -> Compiled[StateT]:
        return self.trainer.compile(state, say=say, total=total)

    def place(self, state: StateT) -> StateT:
        return self.trainer.place(state)

    def abstract_of(self, state: StateT) -> StateT:
        return self.trainer.abstract_of(state)

    def evaluate_lanes(self, compiled: Compiled[StateT], state: StateT, iteration: int) -> EvalMetrics:
        policy_params, stats = self.trainer.learner.acting(state)
        return compiled.evaluate(policy_params, stats, eval_key(self.trainer.config.run.seed, iteration))

    def lane(self, tree: TreeT, index: int) -> TreeT:
        assert index == 0, "one seed has one lane"
        return tree

    def stack(self, trees: Sequence[StateT]) -> StateT:
        (tree,) = trees
        return tree

    def rebuilt(self, trainer: Trainer[StateT]) -> OneSeed[StateT]:
        return OneSeed(trainer)


def same_abstract(one: TreeT, other: TreeT) -> bool:
    """Whether two abstract states (`Stepper.abstract_of`) have the same structure, shapes, dtypes and shardings."""
    if jax.tree.structure(one) != jax.tree.structure(other):  # type: ignore[operator]  # jaxlib has no stubs for PyTreeDef
        return False
    return all((a.shape, a.dtype, a.sharding) == (b.shape, b.dtype, b.sharding)
               for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(other), strict=True))
