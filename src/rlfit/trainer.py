"""Builds what a run needs from a config and a plan: environments, agent, optimizer, compiled functions.

This is the `plan -> env -> train step` part of the data flow; the host loop lives in `rlfit.runner`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from rlfit.config import Config
from rlfit.envs import VecEnv, load_env
from rlfit.networks import Agent, make_agent
from rlfit.plan import Plan
from rlfit.ppo.evaluate import EvalMetrics, make_evaluator
from rlfit.ppo.iteration import IterationMetrics, TrainState, init_train_state, make_optimizer, make_train_iteration


@dataclass
class Compiled:
    """The compiled functions of a run and how long compiling them took."""

    iteration: Callable[[TrainState], tuple[TrainState, IterationMetrics]]
    evaluate: Callable[[Any, Any, jax.Array], EvalMetrics]
    compile_s: float


@dataclass
class Trainer:
    """Everything needed to run `plan` for `config` on this process's devices."""

    config: Config
    plan: Plan
    env: Any
    train_env: VecEnv
    eval_env: VecEnv
    agent: Agent
    optimizer: Any
    obs_example: Any
    """One unbatched observation of zeros (shapes and dtypes of the environment's observations)."""

    @classmethod
    def build(cls, config: Config, plan: Plan, env: Any | None = None) -> Trainer:
        """Loads the environment (unless given) and builds the agent for `plan`'s sizes."""
        env = env if env is not None else load_env(config.env, plan.backend)
        episode_length = max(1, config.env.episode_length // config.env.action_repeat)
        train_env = VecEnv(env, plan.sizes.num_envs, episode_length, config.env.action_repeat)
        eval_env = VecEnv(env, config.run.num_eval_envs, episode_length, config.env.action_repeat)
        obs_example = observation_example(env)
        agent = make_agent(obs_example, int(env.action_size), config.network, plan.precision)
        return cls(config, plan, env, train_env, eval_env, agent, make_optimizer(config.ppo), obs_example)

    @property
    def loss_scaling(self) -> bool:
        """fp16 network compute trains with dynamic loss scaling."""
        return self.plan.precision == "fp16"

    def init_state(self) -> TrainState:
        return init_train_state(self.train_env, self.agent, self.optimizer, self.config.run.seed,
                                self.loss_scaling)

    def abstract_state(self) -> TrainState:
        """The TrainState's shapes and dtypes, without allocating or running anything."""
        return jax.eval_shape(self.init_state)

    def train_iteration_fn(self) -> Callable[[TrainState], tuple[TrainState, IterationMetrics]]:
        """The pure training iteration (not yet compiled)."""
        return make_train_iteration(self.train_env, self.agent, self.optimizer, self.config.ppo, self.plan.sizes)

    def compile(self, state: TrainState | None = None) -> Compiled:
        """Compiles the training iteration (state donated) and the evaluator, ahead of time."""
        state = state if state is not None else self.abstract_state()
        started = time.perf_counter()
        iteration = jax.jit(self.train_iteration_fn(), donate_argnums=0).lower(state).compile()
        evaluate = jax.jit(make_evaluator(self.eval_env, self.agent)).lower(
            state.params.policy, state.normalizer, jax.ShapeDtypeStruct((2,), jnp.uint32)).compile()
        return Compiled(iteration, evaluate, time.perf_counter() - started)


def observation_example(env: Any) -> Any:
    """One unbatched observation of `env` as zeros (shapes from an abstract reset, nothing run)."""
    shapes = jax.eval_shape(env.reset, jax.ShapeDtypeStruct((2,), jnp.uint32)).obs
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
