"""FastTD3 behind the algorithm contract: its sizes (`rlfit.algos.offpolicy.sizes`), presets, rules, back-off
and Learner.

An iteration is `policy_steps_per_iteration` policy steps of the `num_envs` environments, each followed by
`grad_updates_per_step` gradient updates: one compiled call, one metrics row. The replay buffer is prefilled
to `min_replay_size` with a uniform random policy when the state is created, so the starting checkpoint
already holds it. The buffer, its checkpointing (`stored_rows`), its refill and its split over devices are
shared with SAC (`rlfit.algos.offpolicy.learner`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import jax

from rlfit.algos.contract import Algorithm, Learner, Observation, PolicySpec, PyTree, RunPlan, Variables
from rlfit.algos.fasttd3.networks import make_fasttd3_networks
from rlfit.algos.fasttd3.planning import MEMORY_RULES
from rlfit.algos.fasttd3.step import (FastTD3Metrics, FastTD3State, draw_noise_std, init_fasttd3_state,
                                     make_train_step)
from rlfit.algos.fasttd3.update import make_optimizers
from rlfit.algos.offpolicy.learner import make_filled, replay_learner_parts, sized_config
from rlfit.algos.offpolicy.sizes import ReplaySizes, section_sizes, smaller_sizes
from rlfit.errors import UserError
from rlfit.networks.heads import DETERMINISTIC_TANH

if TYPE_CHECKING:
    from rlfit.config.schema import Config
    from rlfit.envs.vec_env import VecEnv


def metrics_row(metrics: FastTD3Metrics) -> dict[str, float | int]:
    return {
        "loss/critic": float(metrics.critic_loss),
        "loss/actor": float(metrics.actor_loss),
        "q_mean": float(metrics.q_mean),
        "noise_std": float(metrics.noise_std),
        "replay_size": int(metrics.replay_size),
        "updates": int(metrics.updates),
        "actor_updates": int(metrics.actor_updates),
    }


def build(config: Config, plan: RunPlan, train_env: VecEnv, obs_example: Observation
          ) -> Learner[FastTD3State, FastTD3Metrics, Variables]:
    if train_env.action_space.discrete:
        raise UserError(f"algo: fasttd3 acts with continuous actions and '{config.env.name}' has "
                        f"{train_env.action_space.describe()}; use algo: ppo (categorical policy) for it")
    sizes = cast(ReplaySizes, plan.sizes)  # the plan holds this algorithm's sizes (`ALGORITHM.sizes_type`)
    settings = sized_config(config.fasttd3, sizes)
    networks = make_fasttd3_networks(obs_example, int(train_env.action_size), settings, plan.precision)
    optimizers = make_optimizers(settings)
    filled: Callable[[FastTD3State], FastTD3State] = make_filled(train_env, settings)

    def init(seed: int) -> FastTD3State:
        return filled(init_fasttd3_state(train_env, networks, optimizers, settings, seed))

    parts = replay_learner_parts(train_env, settings, filled)

    def resize(state: FastTD3State, key: jax.Array) -> FastTD3State:
        """The shared resize (new environments, a new prefilled buffer) with a noise std for each new environment."""
        env_key, noise_key = jax.random.split(key)
        return parts.resize(state._replace(noise_std=draw_noise_std(noise_key, train_env.num_envs, settings)), env_key)

    return Learner(
        init=init,
        step=make_train_step(train_env, networks, optimizers, settings, steps=sizes.policy_steps_per_iteration),
        metrics_row=metrics_row,
        acting=lambda state: (state.params.policy, state.normalizer),
        policy_logits=networks.policy_logits,
        policy=PolicySpec(tuple(settings.actor_hidden), settings.activation, settings.policy_obs_key,
                          head=DETERMINISTIC_TANH),
        resize=resize,
        stored_rows=parts.stored_rows,
        refill=parts.refill,
        env_axes=lambda state: axes_with_noise_std(parts.env_axes(state)),
        ynn_fusions=False,  # many small matrix products, as SAC's
    )


def axes_with_noise_std(axes: PyTree) -> PyTree:
    """The shared environment axes of a state (a `FastTD3State` of axis numbers) with one noise std per environment."""
    state_axes = cast(FastTD3State, axes)  # the shared parts keep the state's NamedTuple
    return state_axes._replace(noise_std=0)  # type: ignore[arg-type]  # an axes tree holds axis numbers, not arrays


ALGORITHM: Algorithm[ReplaySizes, FastTD3State, FastTD3Metrics, Variables] = Algorithm(
    name="fasttd3",
    sizes_type=ReplaySizes,
    config_sizes=lambda config: section_sizes(config.fasttd3),
    smaller_sizes=smaller_sizes,
    build=build,
    memory=MEMORY_RULES,
    non_finite_hint="lower fasttd3.learning_rate or set fasttd3.critic_layer_norm=true",
)
