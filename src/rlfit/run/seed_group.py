"""Several seeds of one configuration in one compiled program: the algorithm's pure `init`/`step` and the
evaluator, `jax.vmap`ped over a leading seed axis (as PureJaxRL does), so a study traces and compiles once and
the device works on all seeds' environments at once.

    group = SeedGroup.build(trainer, seeds=(0, 1, 2, 3))
    state = group.init()                     # every leaf [num_seeds, ...]
    state, metrics = group.step(state)       # one iteration of every seed; metrics [num_seeds]
    result = group.evaluate(state, iteration)    # EvalMetrics, each field [num_seeds]
    lane(state, 2)                           # the third seed's state, as a run of that seed alone would hold it

A seed's lane follows the same arithmetic as the seed trained alone, but XLA may order a batched reduction
differently: after a few iterations a lane equals the solo run to 1e-5 (tested on the toy environment), while
over many updates the rounding differences grow as training amplifies them, so a long run's lane is another
sample of the same seed's training, not a copy of it (measured by `benchmarks/seeds_vmap.py`: after 1280
updates on CartpoleBalance the final eval rewards of the two differ by up to 67.7). A lane does not depend on
the other seeds of its group: the same seed in another group of the same size is bit-identical (tested).
A SeedGroup is a `rlfit.run.stepper.Stepper`: the host loop (`rlfit.run.loop`) trains its lanes as it trains a
single run; `rlfit experiment` opens them through `rlfit.study.group_runner`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Generic, TypeVar, cast

import jax
import jax.numpy as jnp

from rlfit.algos.contract import StateT, StepMetrics, TreeT
from rlfit.hardware.compile_log import ProgramCompile, timed_compile
from rlfit.hardware.jax_setup import compile_ahead
from rlfit.run.evaluate import EvalMetrics, Evaluation, eval_key, make_evaluator
from rlfit.run.trainer import PROGRAM_NAMES, Compiled, Iteration, Trainer, seed_argument, seed_is_traced


def stack(trees: Sequence[TreeT]) -> TreeT:
    """Pytrees of equal structure -> one pytree whose leaves gain a leading axis [len(trees), ...]."""
    stacked: TreeT = jax.tree.map(lambda *leaves: jnp.stack(leaves), *trees)
    return stacked


def lane(tree: TreeT, index: int) -> TreeT:
    """The `index`-th slice of every leaf's leading axis."""
    sliced: TreeT = jax.tree.map(lambda leaf: leaf[index], tree)
    return sliced


@dataclass
class SeedGroup(Generic[StateT]):
    """A Trainer's learner and evaluator over `seeds`, compiled once for all of them."""

    trainer: Trainer[StateT]
    seeds: tuple[int, ...]
    reused: bool = False
    """The programs were compiled for another group of the same size in this process (`with_seeds`)."""
    _step: Iteration[StateT] | None = None
    _evaluate: Evaluation | None = None
    _records: list[ProgramCompile] = field(default_factory=list)

    @classmethod
    def build(cls, trainer: Trainer[StateT], seeds: Sequence[int]) -> SeedGroup[StateT]:
        if len(set(seeds)) != len(seeds) or not seeds:
            raise ValueError(f"seeds must be distinct and at least one, got {list(seeds)}")
        return SeedGroup(trainer, tuple(int(s) for s in seeds))

    def init(self) -> StateT:
        """The stacked fresh states of every seed, each made by the program that makes a solo run's (one compile,
        or a program-store and compile-cache hit, for all the seeds)."""
        shared = None  # one program for every int32 seed; a seed outside int32 is built into a program of its own
        states = []
        for seed in self.seeds:
            if seed_is_traced(seed):
                shared = shared or self.trainer.starting_state_program(seed)[0]
                program = shared
            else:
                program = self.trainer.starting_state_program(seed)[0]
            states.append(program(seed_argument(seed)))
        return stack(states)

    def abstract_state(self) -> StateT:
        """The stacked state's shapes and dtypes, nothing allocated."""
        shapes: StateT = jax.eval_shape(lambda: stack([self.trainer.learner.init(seed) for seed in self.seeds]))
        return shapes

    def compile(self, state: StateT | None = None) -> float:
        """Compiles the vmapped step (state donated) and evaluator for `state`'s shapes (default: the abstract
        state); returns the seconds it took."""
        trainer, learner = self.trainer, self.trainer.learner
        started = time.perf_counter()
        abstract = self.abstract_of(state if state is not None else self.abstract_state())
        group = f"{len(self.seeds)} seeds"
        with timed_compile(PROGRAM_NAMES[0]) as step_timing:
            self._step = compile_ahead(jax.vmap(learner.step), abstract, donate_argnums=(0,),
                                       ynn_fusions=trainer.step_ynn_fusions,
                                       store_key=trainer.store_key(f"{PROGRAM_NAMES[0]} of {group}"))
        policy_params, stats = jax.eval_shape(jax.vmap(learner.acting), abstract)
        keys = jax.ShapeDtypeStruct((len(self.seeds), 2), jnp.uint32)
        evaluator = jax.vmap(make_evaluator(trainer.eval_env, learner.policy_logits, learner.policy_rate,
                                            learner.policy.head))
        with timed_compile(PROGRAM_NAMES[1]) as eval_timing:
            self._evaluate = compile_ahead(evaluator, policy_params, stats, keys, ynn_fusions=trainer.eval_ynn_fusions,
                                           store_key=trainer.store_key(f"{PROGRAM_NAMES[1]} of {group}"))
        self._records = [timing.record for timing in (step_timing, eval_timing) if timing.record is not None]
        self.reused = False
        return time.perf_counter() - started

    def with_seeds(self, seeds: Sequence[int]) -> SeedGroup[StateT]:
        """The same group for other seeds, sharing the compiled programs when the count is the same."""
        other = SeedGroup.build(self.trainer, seeds)
        if len(other.seeds) == len(self.seeds) and self._step is not None:
            other._step, other._evaluate, other._records, other.reused = self._step, self._evaluate, self._records, True
        return other

    @property
    def compiled_step(self) -> Iteration[StateT] | None:
        """The compiled vmapped step (its `memory_analysis()` is the planner's check), None before compiling."""
        return self._step

    def step(self, state: StateT) -> tuple[StateT, StepMetrics]:
        if self._step is None:
            self.compile(state)
        return cast(Iteration[StateT], self._step)(state)  # compiled above

    def evaluate(self, state: StateT, iteration: int) -> EvalMetrics:
        """Every seed's evaluation (each field [num_seeds]), with each seed's own evaluation key at `iteration`
        (the key a solo run uses)."""
        if self._evaluate is None:
            self.compile(state)
        return self._evaluated(cast(Evaluation, self._evaluate), state, iteration)  # compiled above

    def _evaluated(self, evaluate: Evaluation, state: StateT, iteration: int) -> EvalMetrics:
        policy_params, stats = jax.vmap(self.trainer.learner.acting)(state)
        keys = jnp.stack([eval_key(seed, iteration) for seed in self.seeds])
        return evaluate(policy_params, stats, keys)

    # The host loop's `Stepper`.

    def starting_state(self, say: Callable[[str], None] | None, total: int) -> tuple[StateT, ProgramCompile | None]:
        return self.init(), None

    def programs(self, state: StateT | None, say: Callable[[str], None] | None, total: int) -> Compiled[StateT]:
        """The compiled step and evaluation (compiled here unless they are for `state`'s shapes already), as the
        loop takes a single run's; `reused` when another group of this size compiled them."""
        if self._step is None:
            self.compile(state)
        return Compiled(_done(cast(Iteration[StateT], self._step)), _done(cast(Evaluation, self._evaluate)),
                        self.abstract_of(state if state is not None else self.abstract_state()),
                        list(self._records), self.reused)

    def evaluate_lanes(self, compiled: Compiled[StateT], state: StateT, iteration: int) -> EvalMetrics:
        return self._evaluated(compiled.evaluate, state, iteration)

    def place(self, state: StateT) -> StateT:
        return state

    def abstract_of(self, state: StateT) -> StateT:
        abstract: StateT = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), state)
        return abstract

    def lane(self, tree: TreeT, index: int) -> TreeT:
        return lane(tree, index)

    def stack(self, trees: Sequence[StateT]) -> StateT:
        return stack(trees)

    def rebuilt(self, trainer: Trainer[StateT]) -> SeedGroup[StateT]:
        return SeedGroup.build(trainer, self.seeds)


ProgramT = TypeVar("ProgramT")


def _done(value: ProgramT) -> Future[ProgramT]:
    """`value` as a finished future (a group's programs are compiled before the loop starts)."""
    future: Future[ProgramT] = Future()
    future.set_result(value)
    return future
