"""Builds what a run needs from a config and a plan: the environments and the algorithm's Learner
(`rlfit.algos.contract`), and compiles its training step and evaluation ahead of time.

It trains nothing: this is the `plan -> env -> train step` part of the data flow; the host loop that runs the
compiled step lives in `rlfit.runner`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from rlfit.algos.contract import Learner
from rlfit.config import Config
from rlfit.envs import VecEnv, load_env
from rlfit.envs.action_space import ActionSpace
from rlfit.envs.vec_env import episode_steps
from rlfit.networks import select_obs
from rlfit.networks.heads import action_head
from rlfit.evaluate import EvalMetrics, make_evaluator
from rlfit.compile_log import ProgramCompile, timed_compile
from rlfit.jax_setup import compile_ahead
from rlfit.mesh import DeviceLayout, default_env_axes
from rlfit.plan import Plan


@dataclass
class Compiled:
    """The compiled functions of a run and how long compiling them took."""

    iteration: Callable[[Any], tuple[Any, Any]]
    evaluate: Callable[[Any, Any, jax.Array], EvalMetrics]
    compile_s: float
    reused: bool = False
    """The programs were compiled earlier in this process for the same config and sizes (another seed)."""
    programs: tuple[ProgramCompile, ...] = ()
    """Each program's compile: its name, seconds and whether the persistent cache supplied it."""


@dataclass
class Trainer:
    """Everything needed to run `plan` for `config` on this process's devices: environments and the algorithm's
    Learner (`rlfit.algos.contract`)."""

    config: Config
    plan: Plan
    env: Any
    train_env: VecEnv
    eval_env: VecEnv
    learner: Learner
    obs_example: Any
    """One unbatched observation of zeros (shapes and dtypes of the environment's observations)."""
    layout: DeviceLayout
    """The devices the run is split over (`plan.devices`) and how its state lies on them."""

    @classmethod
    def build(cls, config: Config, plan: Plan, env: Any | None = None) -> Trainer:
        """Loads the environment (unless given) and builds the algorithm's Learner for `plan`'s sizes."""
        from rlfit.algos.registry import algorithm

        env = env if env is not None else load_env(config.env, plan.backend)
        episode_length = episode_steps(config.env, env)
        train_env = VecEnv(env, plan.sizes.num_envs, episode_length, config.env.action_repeat)
        eval_env = VecEnv(env, config.run.num_eval_envs, episode_length, config.env.action_repeat)
        obs_example = observation_example(env)
        learner = algorithm(config.algo).build(config, plan, train_env, obs_example)
        select_obs(obs_example, learner.policy.obs_key)  # a missing observation entry: one line, nothing written
        action_head(learner.policy.head, train_env.action_space)  # a head that cannot act here: the same
        return cls(config, plan, env, train_env, eval_env, learner, obs_example, DeviceLayout(plan.devices))

    @property
    def action_space(self) -> ActionSpace:
        return self.train_env.action_space

    def init_state(self) -> Any:
        """A fresh training state from the config's seed; over several devices, created where it lives."""
        seed = self.config.run.seed
        if not self.layout.parallel:
            return jax.device_put(self.learner.init(seed), self.layout.single)
        return jax.jit(lambda: self.learner.init(seed), out_shardings=self.state_shardings)()

    def abstract_state(self) -> Any:
        """The training state's shapes, dtypes and shardings (over several devices each leaf's; on one, the
        device), without allocating or running anything."""
        return self.abstract_of(jax.eval_shape(self.init_state))

    def abstract_of(self, state: Any) -> Any:
        """`state`'s leaves (arrays or shapes) as the ShapeDtypeStructs every program is compiled for: the same
        shapes, dtypes and shardings whether the state is fresh, restored or only traced, so that a resumed
        process lowers the same programs and the persistent compile cache hits."""
        if self.state_shardings is None:
            return jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=self.layout.single),
                                state)
        return jax.tree.map(lambda leaf, sharding: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding),
                            state, self.state_shardings)

    @functools.cached_property
    def state_shardings(self) -> Any:
        """Per leaf of the training state, its sharding over the run's devices (`rlfit.mesh`); None on one.
        (Traces `init` once for the shapes; kept, since every placement and compile asks.)"""
        if not self.layout.parallel:
            return None
        shapes = jax.eval_shape(lambda: self.learner.init(self.config.run.seed))
        env_axes = (self.learner.env_axes or default_env_axes)(shapes)
        return self.layout.shardings(shapes, env_axes)

    def place(self, state: Any) -> Any:
        """`state` (restored, resized or fresh) laid out on the run's devices; unchanged on one device."""
        if not self.layout.parallel:
            return jax.device_put(state, self.layout.single)  # committed, as a restored state is (`abstract_of`)
        return jax.device_put(state, self.state_shardings)

    def train_iteration_fn(self) -> Callable[[Any], tuple[Any, Any]]:
        """The pure training iteration (not yet compiled)."""
        return self.learner.step

    def compile_iteration(self, state: Any | None = None) -> Any:
        """The training iteration compiled ahead of time (state donated), for `state` or the abstract state."""
        shardings = self.state_shardings
        parallel = shardings is not None
        with self.layout.compiling():
            return compile_ahead(self.train_iteration_fn(), self.abstract_of(state) if state is not None
                                 else self.abstract_state(),
                                 donate_argnums=(0,), ynn_fusions=self.step_ynn_fusions,
                                 in_shardings=(shardings,) if parallel else None,
                                 out_shardings=(shardings, self.layout.replicated) if parallel else None)

    @property
    def step_ynn_fusions(self) -> bool:
        """Whether the training step compiles with XLA's YNNPACK fusions on a CPU (`rlfit.jax_setup`)."""
        return self.learner.ynn_fusions and self.eval_ynn_fusions

    @property
    def eval_ynn_fusions(self) -> bool:
        """Whether the evaluation compiles with XLA's YNNPACK fusions on a CPU: unless the networks convolve (an
        encoder of camera frames), when every program compiles without them."""
        return self.config.env.observation != "pixels"

    def compile(self, state: Any | None = None, say: Callable[[str], None] | None = None) -> Compiled:
        """Compiles the training iteration (state donated) and the evaluator, ahead of time.

        The programs do not depend on the seed: inside `reusing_programs()` (an experiment's trials) a second
        run of the same config and sizes in this process reuses them: no tracing, no compiling, `compile_s` 0.
        `say` (the console's) hears which program is being compiled and what it took.
        """
        key = program_key(self.config, self.plan)
        if not _REUSE["enabled"]:
            return self._compile(state, say)
        if key in _PROGRAMS:
            _PROGRAMS[key] = _PROGRAMS.pop(key)  # most recently used last
            return dataclasses.replace(_PROGRAMS[key], compile_s=0.0, reused=True, programs=())
        compiled = self._compile(state, say)
        _PROGRAMS[key] = compiled
        while len(_PROGRAMS) > PROGRAMS_KEPT:
            _PROGRAMS.pop(next(iter(_PROGRAMS)))
        return compiled

    def _compile(self, state: Any | None, say: Callable[[str], None] | None = None) -> Compiled:
        state = state if state is not None else self.abstract_state()
        started = time.perf_counter()
        programs = (("training step", self.compile_iteration), ("evaluation", self.compile_evaluator))
        executables, records = [], []
        for number, (name, compile_program) in enumerate(programs, start=1):
            if say is not None:
                say(f"compiling {number} of {len(programs)}: {name}")
            with timed_compile(name) as timing:
                executables.append(compile_program(state))
            records.append(timing.record)
            if say is not None:
                source = {True: " (from the compile cache)", False: "", None: " (no compile cache)"}
                say(f"compiled {number} of {len(programs)}: {name} in {timing.record.compile_s:.1f}s"
                    f"{source[timing.record.from_cache]}")
        return Compiled(*executables, time.perf_counter() - started, programs=tuple(records))

    def compile_evaluator(self, state: Any | None = None) -> Any:
        """The evaluation compiled ahead of time for `state`'s acting parameters (or the abstract state's):
        (policy params, stats, key) -> EvalMetrics. Over several devices the parameters are replicated and the
        evaluation's environments split between the devices (`rlfit.mesh.split_envs`)."""
        state = self.abstract_of(state) if state is not None else self.abstract_state()
        policy_params, stats = self.learner.acting(state)
        replicated = self.layout.replicated if self.layout.parallel else None
        evaluator = make_evaluator(self.eval_env, self.learner.policy_logits, self.learner.policy_rate,
                                   self.learner.policy.head)
        with self.layout.compiling():
            return compile_ahead(evaluator, policy_params, stats, jax.ShapeDtypeStruct((2,), jnp.uint32),
                                 ynn_fusions=self.eval_ynn_fusions, in_shardings=replicated,
                                 out_shardings=replicated)


PROGRAMS_KEPT = 4
"""Compiled programs this process keeps for reuse (each holds its executables' device code)."""
_PROGRAMS: dict[str, Compiled] = {}
_REUSE = {"enabled": False}


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
    """Releases the kept programs (the runner calls it when backing off from an out-of-memory error)."""
    _PROGRAMS.clear()


def program_key(config: Config, plan: Plan) -> str:
    """What the compiled programs depend on: the config without its seed, and the plan's sizes and target."""
    return json.dumps({"config": config.to_dict_without_seed(), "sizes": plan.sizes._asdict(), "backend": plan.backend,
                       "impl": plan.impl, "precision": plan.precision, "devices": plan.devices}, sort_keys=True, default=str)


def observation_example(env: Any) -> Any:
    """One unbatched observation of `env` as zeros (shapes from an abstract reset, nothing run)."""
    shapes = jax.eval_shape(env.reset, jax.ShapeDtypeStruct((2,), jnp.uint32)).obs
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
