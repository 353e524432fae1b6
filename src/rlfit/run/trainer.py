"""Builds what a run needs from a config and a plan: the environments and the algorithm's Learner
(`rlfit.algos.contract`), and compiles its training step and evaluation ahead of time.

It trains nothing: this is the `plan -> env -> train step` part of the data flow; the host loop that runs the
compiled step lives in `rlfit.run.loop`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar, cast

import jax
import jax.numpy as jnp
import numpy as np

from rlfit.algos.contract import Learner, Observation, PyTree, StateT, StepMetrics, TrainState
from rlfit.config.algorithms import ALGORITHMS
from rlfit.config.schema import Config
from rlfit.envs import VecEnv, load_env
from rlfit.envs.action_space import ActionSpace
from rlfit.envs.fingerprint import model_digest
from rlfit.envs.randomization import Randomization, resolve_randomization
from rlfit.envs.loading import FAMILIES
from rlfit.envs.vec_env import episode_steps, observation_example
from rlfit.hardware.program_store import result_shapes
from rlfit.networks import select_obs
from rlfit.networks.heads import action_head
from rlfit.run.evaluate import Evaluation, make_evaluator, make_paired_evaluator
from rlfit.hardware.compile_log import ProgramCompile, in_background, timed_compile
from rlfit.hardware.jax_setup import compile_ahead
from rlfit.parallel.mesh import DeviceLayout, default_env_axes
from rlfit.planning.plan import Plan


Environment = object
"""An environment as `rlfit.envs.load_env` loads it (a Playground environment or an adapter of one; the library has no
types): the Trainer passes it on and never looks inside."""
Iteration = Callable[[StateT], tuple[StateT, StepMetrics]]
"""The compiled training iteration: state -> (state, metrics) (the state donated)."""


@dataclass
class Compiled(Generic[StateT]):
    """The compiled functions of a run, compiled in the background (`rlfit.hardware.compile_log.in_background`): the
    training step first, then the evaluation, which the run needs only at its first evaluation."""

    step: Future[Iteration[StateT]]
    """The training iteration, compiled (`iteration` waits for it)."""
    evaluation: Future[Evaluation]
    """The evaluation, compiled (`evaluate` waits for it)."""
    abstract: StateT
    """The state's shapes, dtypes and shardings the programs were compiled for (`Trainer.abstract_of`)."""
    records: list[ProgramCompile] = field(default_factory=list)
    """Each program's compile, appended as it finishes: its name, seconds, whether the persistent cache supplied it."""
    reused: bool = False
    """The programs were compiled earlier in this process for the same config and sizes (another seed)."""

    @property
    def iteration(self) -> Iteration[StateT]:
        return self.step.result()

    @property
    def evaluate(self) -> Evaluation:
        return self.evaluation.result()

    @property
    def programs(self) -> tuple[ProgramCompile, ...]:
        """The programs compiled so far (none when reused), in the order they are numbered."""
        order = {name: number for number, name in enumerate(PROGRAM_NAMES)}
        return tuple(sorted(self.records, key=lambda record: order[record.name])) if not self.reused else ()

    @property
    def compile_s(self) -> float:
        """Seconds spent compiling the programs compiled so far, each counted in full (they may overlap)."""
        return sum(record.compile_s for record in self.programs)


StartingState = Callable[[np.int32], StateT]
"""The compiled program that makes a fresh training state from its seed argument (`seed_argument`)."""
ProgramT = TypeVar("ProgramT")


class ProgramTiming(Protocol):
    """What `rlfit.hardware.compile_log.timed_compile` yields: the compile's record once the block ends."""

    @property
    def record(self) -> ProgramCompile | None: ...


PROGRAM_NAMES = ("training step", "evaluation", "starting state")
"""The programs a session compiles, in the order the console numbers them: the starting state only when the run
starts fresh (a resumed run restores its state)."""


@dataclass
class Trainer(Generic[StateT]):
    """Everything needed to run `plan` for `config` on this process's devices: environments and the algorithm's
    Learner (`rlfit.algos.contract`), whose training state is a `StateT` (`TrainState` where the algorithm is
    picked by name at run time, the registry's erased view)."""

    config: Config
    plan: Plan
    env: Environment
    """The environment as loaded (`rlfit.envs.load_env`: a Playground environment or an adapter of one)."""
    train_env: VecEnv
    eval_env: VecEnv
    learner: Learner[StateT, StepMetrics, PyTree]
    obs_example: Observation
    """One unbatched observation of zeros (shapes and dtypes of the environment's observations)."""
    layout: DeviceLayout
    """The devices the run is split over (`plan.devices`) and how its state lies on them."""
    model_digest: str | None
    """`rlfit.envs.fingerprint.model_digest` of the environment (None without a MuJoCo model)."""
    randomization: Randomization
    """What `env.randomization` resolved to: the randomizer `train_env` draws its models with, or none."""
    randomized_eval_env: VecEnv | None = None
    """With randomization: the evaluation's environments on freshly drawn models (`eval_env` keeps the nominal one)."""

    @classmethod
    def build(cls, config: Config, plan: Plan, env: Environment | None = None) -> Trainer[TrainState]:
        """Loads the environment (unless given) and builds the algorithm's Learner for `plan`'s sizes."""
        from rlfit.algos.registry import algorithm

        env = env if env is not None else load_env(config.env, plan.backend)
        randomization = resolve_randomization(config.env.randomization, config.env.name, env, plan.sizes.num_envs)
        episode_length = episode_steps(config.env, env)
        repeat, randomizer = config.env.action_repeat, randomization.function
        train_env = VecEnv(env, plan.sizes.num_envs, episode_length, repeat, randomizer)
        eval_env = VecEnv(env, config.run.num_eval_envs, episode_length, repeat)
        randomized_eval_env = (VecEnv(env, config.run.num_eval_envs, episode_length, repeat, randomizer)
                               if randomizer is not None else None)
        layout = DeviceLayout(plan.devices)
        digest = model_digest(env)
        obs_example = observation_example(env, stored_program_key(config, plan, layout, digest, "observation shapes"))
        learner = algorithm(config.algo).build(config, plan, train_env, obs_example)
        select_obs(obs_example, learner.policy.obs_key)  # a missing observation entry: one line, nothing written
        action_head(learner.policy.head, train_env.action_space)  # a head that cannot act here: the same
        return Trainer(config, plan, env, train_env, eval_env, learner, obs_example, layout, digest, randomization,
                       randomized_eval_env)

    @property
    def action_space(self) -> ActionSpace:
        return self.train_env.action_space

    def init_state(self) -> StateT:
        """A fresh training state from the config's seed; over several devices, created where it lives."""
        return self.starting_state()[0]

    def starting_state(self, say: Callable[[str], None] | None = None, total: int = len(PROGRAM_NAMES)
                       ) -> tuple[StateT, ProgramCompile | None]:
        """A fresh training state from the config's seed, made by one compiled program (the learner's `init`
        compiled ahead of time, the seed its argument: one lookup in the persistent cache for every seed, instead
        of a compile per small operation that runs eagerly), and that program's compile. `say` hears it as program
        `total` of `total`. Inside `reusing_programs()` a later seed reuses the program (no compile: None)."""
        seed = self.config.run.seed
        program, record = self.starting_state_program(seed, say, total)
        return program(seed_argument(seed)), record

    def starting_state_program(self, seed: int, say: Callable[[str], None] | None = None,
                               total: int = len(PROGRAM_NAMES)) -> tuple[StartingState[StateT], ProgramCompile | None]:
        """The compiled program that makes the fresh training state of `seed` from `seed_argument(seed)` (an int32
        seed is the argument; a seed outside int32 is built in), and its compile (None when reused)."""
        traced = seed_is_traced(seed)
        init = self.starting_state_fn if traced else built_in_seed(self.learner.init, seed)
        name = PROGRAM_NAMES[2]
        key = ("starting state", program_key(self.config, self.plan))
        if _REUSE["enabled"] and traced and key in _PROGRAMS:  # an experiment's next seed: the same program
            return cast(StartingState[StateT], _PROGRAMS[key]), None
        shardings = self.state_shardings if self.layout.parallel else self.layout.single
        with _announced(say, name, total, total) as timing, self.layout.compiling():
            program: StartingState[StateT] = compile_ahead(init, seed_argument(seed), ynn_fusions=self.eval_ynn_fusions,
                                    out_shardings=shardings, store_key=self.store_key(name) if traced else None)
        if _REUSE["enabled"] and traced:
            _PROGRAMS[key] = program
        return program, timing.record

    @functools.cached_property
    def starting_state_fn(self) -> Callable[[int], StateT]:
        """`seed -> the fresh training state` (int32 seed [] -> the learner's state), the function of the
        starting-state program, named `starting_state` (XLA's compile log names the program `jit(starting_state)`).
        One jitted function, and JAX keeps its trace for the same argument shapes: the abstract state's shapes
        (`abstract_state`) and the starting state's program (traced again inside its export to the program store,
        or inside its own jit without the store) trace it once, not twice. Trainers of the same stored-program
        key (`store_key`: the planner's Trainer and training's, in one `rlfit train`) share the function, as the
        store shares their programs between processes (benchmarks/methods/first_step.md). XLA inlines the nested
        call, so the program computes the same state to the bit (tests/run/test_starting_state.py)."""
        key = self.store_key(f"{PROGRAM_NAMES[2]} function")
        if key is not None and key in _STARTING_FNS:
            return cast(Callable[[int], StateT], _STARTING_FNS[key])
        init = self.learner.init

        def starting_state(seed: int) -> StateT:
            return init(seed)

        function = cast(Callable[[int], StateT], jax.jit(starting_state))
        if key is not None:
            _STARTING_FNS[key] = function
            while len(_STARTING_FNS) > STARTING_FNS_KEPT:
                _STARTING_FNS.pop(next(iter(_STARTING_FNS)))
        return function

    def abstract_state(self) -> StateT:
        """The training state's shapes, dtypes and shardings (over several devices each leaf's; on one, the
        device), without allocating or running anything; read from the program store when a process with the
        same settings traced them before (`rlfit.hardware.program_store.result_shapes`)."""
        shapes: StateT = result_shapes(self.starting_state_fn, (np.int32(0),),
                                       self.store_key(f"{PROGRAM_NAMES[2]} shapes"))
        return self.abstract_of(shapes)

    def abstract_of(self, state: StateT) -> StateT:
        """`state`'s leaves (arrays or shapes) as the ShapeDtypeStructs every program is compiled for: the same
        shapes, dtypes and shardings whether the state is fresh, restored or only traced, so that a resumed
        process lowers the same programs and the persistent compile cache hits."""
        abstract: StateT
        if self.state_shardings is None:
            abstract = jax.tree.map(
                lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=self.layout.single), state)
        else:
            abstract = jax.tree.map(
                lambda leaf, sharding: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding), state,
                self.state_shardings)
        return abstract

    @functools.cached_property
    def state_shardings(self) -> PyTree:
        """Per leaf of the training state, its sharding over the run's devices (`rlfit.parallel.mesh`); None on one.
        (Traces `init` once for the shapes; kept, since every placement and compile asks.)"""
        if not self.layout.parallel:
            return None
        shapes = jax.eval_shape(lambda: self.learner.init(self.config.run.seed))
        env_axes = (self.learner.env_axes or default_env_axes)(shapes)
        shardings: PyTree = self.layout.shardings(shapes, env_axes)
        return shardings

    def place(self, state: StateT) -> StateT:
        """`state` (restored, resized or fresh) laid out on the run's devices; unchanged on one device."""
        placed: StateT = jax.device_put(state, self.layout.single if not self.layout.parallel  # committed, as a
                                        else self.state_shardings)  # restored state is (`abstract_of`)
        return placed

    def train_iteration_fn(self) -> Iteration[StateT]:
        """The pure training iteration (not yet compiled)."""
        return self.learner.step

    def compile_iteration(self, state: StateT | None = None) -> Iteration[StateT]:
        """The training iteration compiled ahead of time (state donated), for `state` or the abstract state."""
        shardings = self.state_shardings
        parallel = shardings is not None
        with self.layout.compiling():
            iteration: Iteration[StateT] = compile_ahead(self.train_iteration_fn(), self.abstract_of(state) if state is not None
                                 else self.abstract_state(),
                                 donate_argnums=(0,), ynn_fusions=self.step_ynn_fusions,
                                 in_shardings=(shardings,) if parallel else None,
                                 out_shardings=(shardings, self.layout.replicated) if parallel else None,
                                 store_key=self.store_key(PROGRAM_NAMES[0]))
        return iteration

    def store_key(self, program: str) -> str | None:
        """What `program` depends on besides its arguments and the installed packages, for the store of traced
        programs (`rlfit.hardware.program_store`): `stored_program_key` of this run."""
        return stored_program_key(self.config, self.plan, self.layout, self.model_digest, program)

    @property
    def step_ynn_fusions(self) -> bool:
        """Whether the training step compiles with XLA's YNNPACK fusions on a CPU (`rlfit.hardware.jax_setup`)."""
        return self.learner.ynn_fusions and self.eval_ynn_fusions

    @property
    def eval_ynn_fusions(self) -> bool:
        """Whether the evaluation compiles with XLA's YNNPACK fusions on a CPU: unless the networks convolve (an
        encoder of camera frames), when every program compiles without them."""
        return self.config.env.observation != "pixels"

    def compile(self, state: StateT | None = None, say: Callable[[str], None] | None = None,
                total: int = 2) -> Compiled[StateT]:
        """Starts compiling the training iteration (state donated) and the evaluator ahead of time, for `state`'s
        shapes (the abstract state's when None), in the background; returns at once (see `Compiled`).

        The programs do not depend on the seed: inside `reusing_programs()` (an experiment's trials) a second
        run of the same config and sizes in this process reuses them: no tracing, no compiling, `compile_s` 0.
        `say` (the console's) hears which program is being compiled and what it took, numbered of `total`.
        """
        key = program_key(self.config, self.plan)
        if not _REUSE["enabled"]:
            return self._compile(state, say, total)
        if key in _PROGRAMS:
            _PROGRAMS[key] = _PROGRAMS.pop(key)  # most recently used last
            kept = cast(Compiled[StateT], _PROGRAMS[key])  # the same config and sizes: the same algorithm's state
            return dataclasses.replace(kept, reused=True)
        compiled = self._compile(state, say, total)
        _PROGRAMS[key] = compiled
        while len(_PROGRAMS) > PROGRAMS_KEPT:
            _PROGRAMS.pop(next(iter(_PROGRAMS)))
        return compiled

    def _compile(self, state: StateT | None, say: Callable[[str], None] | None, total: int) -> Compiled[StateT]:
        """One background thread compiles the training step, then the evaluation (on a machine of more than two
        cores, a second thread compiles the evaluation alongside)."""
        abstract = self.abstract_of(state) if state is not None else self.abstract_state()
        records: list[ProgramCompile] = []

        def compiling(number: int, compile_program: Callable[[StateT], ProgramT], after: Future[Iteration[StateT]] | None = None
                      ) -> ProgramT:
            if after is not None:
                after.exception()  # waits; the evaluation compiles whether or not the step did
            with _announced(say, PROGRAM_NAMES[number - 1], number, total) as timing:
                executable = compile_program(abstract)
            assert timing.record is not None, "the block's end records the compile"
            records.append(timing.record)
            return executable

        step = in_background(lambda: compiling(1, self.compile_iteration))
        after = step if (os.cpu_count() or 1) <= 2 else None  # two cores: the first step's compile comes first
        evaluation = in_background(lambda: compiling(2, self.compile_evaluator, after))
        return Compiled(step, evaluation, abstract, records)

    def compile_evaluator(self, state: StateT | None = None) -> Evaluation:
        """The evaluation compiled ahead of time for `state`'s acting parameters (or the abstract state's):
        (policy params, stats, key) -> EvalMetrics. Over several devices the parameters are replicated and the
        evaluation's environments split between the devices (`rlfit.parallel.mesh.split_envs`)."""
        state = self.abstract_of(state) if state is not None else self.abstract_state()
        policy_params, stats = self.learner.acting(state)
        replicated = self.layout.replicated if self.layout.parallel else None
        learner = self.learner
        if self.randomized_eval_env is not None:  # the nominal model and freshly drawn ones, in one rollout
            evaluator = make_paired_evaluator(self.eval_env, self.randomized_eval_env, learner.policy_logits,
                                              learner.policy_rate, learner.policy.head)
        else:
            evaluator = make_evaluator(self.eval_env, learner.policy_logits, learner.policy_rate, learner.policy.head)
        with self.layout.compiling():
            evaluation: Evaluation = compile_ahead(evaluator, policy_params, stats, jax.ShapeDtypeStruct((2,), jnp.uint32),
                                 ynn_fusions=self.eval_ynn_fusions, in_shardings=replicated,
                                 out_shardings=replicated, store_key=self.store_key(PROGRAM_NAMES[1]))
        return evaluation


PROGRAMS_KEPT = 4
"""Compiled programs this process keeps for reuse (each holds its executables' device code)."""
_PROGRAMS: dict[str | tuple[str, str], object] = {}
"""Compiled programs kept for reuse: a `Compiled` per `program_key`, a starting state's program (`StartingState`) per
("starting state", key)."""
_REUSE = {"enabled": False}
STARTING_FNS_KEPT = 2
"""Starting-state functions this process keeps for Trainers of the same key (`Trainer.starting_state_fn`)."""
_STARTING_FNS: dict[str, Callable[[int], object]] = {}
"""The jitted starting-state function per stored-program key, oldest first (each holds its trace)."""


@contextlib.contextmanager
def reusing_programs() -> Iterator[None]:
    """Within the block, runs of the same config and sizes (other seeds) reuse compiled programs; after it, or
    after `forget_programs()`, they are released."""
    _REUSE["enabled"] = True
    try:
        yield
    finally:
        _REUSE["enabled"] = False
        forget_programs()


def forget_programs() -> None:
    """Releases the kept programs and starting-state functions (the runner calls it when backing off from an
    out-of-memory error)."""
    _PROGRAMS.clear()
    _STARTING_FNS.clear()


@contextlib.contextmanager
def _announced(say: Callable[[str], None] | None, name: str, number: int, total: int) -> Iterator[ProgramTiming]:
    """Times the compile of program `number` of `total` (`name`) in the block, telling `say` before and after."""
    if say is not None:
        say(f"compiling {number} of {total}: {name}")
    with timed_compile(name) as timing:
        yield timing
    if say is not None and timing.record is not None:
        record = timing.record
        source = {True: " (from the compile cache)", False: "", None: " (no compile cache)"}[record.from_cache]
        if record.from_store:
            source = " (from the program store" + (" and the compile cache)" if record.from_cache else ")")
        say(f"compiled {number} of {total}: {name} in {record.compile_s:.1f}s{source}")


def stored_program_key(config: Config, plan: Plan, layout: DeviceLayout, digest: str | None,
                       program: str) -> str | None:
    """What `program` of a run depends on besides its arguments and the installed packages, for the store of
    traced programs (`rlfit.hardware.program_store`): its name, the config's program settings, the plan and the
    environment's MuJoCo model (`digest`). None (not stored) for a run over several devices and for an environment
    or a randomizer from the user's own code (`module:function`) or an algorithm registered from outside rlfit, which
    the store's digest cannot see. Settings only the host loop reads (`rlfit.config.schema.HOST_LOOP_FIELDS`) are
    left out."""
    prefix, factory, _ = config.env.name.partition(":")
    users_randomizer = ":" in config.env.randomization
    if layout.parallel or (factory and prefix not in FAMILIES) or users_randomizer or not ALGORITHMS.get(
            config.algo, "").startswith("rlfit."):
        return None
    return json.dumps({"program": program, "settings": config.program_settings(), "sizes": plan.sizes._asdict(),
                       "backend": plan.backend, "impl": plan.impl, "precision": plan.precision, "model": digest},
                      sort_keys=True, default=str)


def built_in_seed(init: Callable[[int], StateT], seed: int) -> Callable[[int], StateT]:
    """The starting-state program's function for a `seed` outside int32, built into the program (its argument,
    `seed_argument(seed)`, unread); named `starting_state`, as XLA's compile log then names it."""
    def starting_state(_: int) -> StateT:
        return init(seed)

    return starting_state


def seed_is_traced(seed: int) -> bool:
    """Whether `seed` can be the starting-state program's int32 argument (PRNGKey of an int32 seed is PRNGKey of the
    same Python int); a seed outside int32 is built into the program instead."""
    return -2**31 <= seed < 2**31


def seed_argument(seed: int) -> np.int32:
    """The starting-state program's argument for `seed`: the seed itself, or 0 when it is built in."""
    return np.int32(seed if seed_is_traced(seed) else 0)


def program_key(config: Config, plan: Plan) -> str:
    """What the compiled programs depend on: the config without its seed, and the plan's sizes and target."""
    return json.dumps({"config": config.to_dict_without_seed(), "sizes": plan.sizes._asdict(), "backend": plan.backend,
                       "impl": plan.impl, "precision": plan.precision, "devices": plan.devices}, sort_keys=True, default=str)
