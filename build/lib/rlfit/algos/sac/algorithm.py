"""SAC behind the algorithm contract: its sizes, presets, rules, back-off and Learner.

An iteration is `policy_steps_per_iteration` policy steps of the `num_envs` environments, each followed by
`grad_updates_per_step` gradient updates: one compiled call, one metrics row. The replay buffer is prefilled
to `min_replay_size` with a uniform random policy (compiled) when the state is created, so the starting
checkpoint already holds it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from rlfit.algos.contract import Algorithm, Learner, PolicySpec
from rlfit.algos.sac.config import SACConfig
from rlfit.algos.sac.networks import make_sac_networks
from rlfit.algos.sac.planning import MEMORY_RULES
from rlfit.algos.sac.sizes import SACSizes, config_sizes, smaller_sizes
from rlfit.algos.sac.step import SACMetrics, empty_replay, init_sac_state, make_prefill, make_train_step
from rlfit.algos.sac.update import make_optimizers
from rlfit.envs.pixels import PIXELS_KEY
from rlfit.errors import UserError
from rlfit.parallel.mesh import REPLICATED, default_env_axes
from rlfit.algos.common.loss_scale import loss_scale_row
from rlfit.networks.heads import TANH_GAUSSIAN
from rlfit.networks.pixels import encoder_for


def sized_config(config: SACConfig, sizes: SACSizes) -> SACConfig:
    """The SAC config with the plan's sizes."""
    return dataclasses.replace(config, num_envs=sizes.num_envs, batch_size=sizes.batch_size,
                               max_replay_size=sizes.max_replay_size,
                               min_replay_size=min(config.min_replay_size, sizes.max_replay_size))


def metrics_row(metrics: SACMetrics) -> dict[str, Any]:
    return {
        "loss/critic": float(metrics.critic_loss),
        "loss/actor": float(metrics.actor_loss),
        "loss/alpha": float(metrics.alpha_loss),
        "alpha": float(metrics.alpha),
        "entropy": float(metrics.entropy),
        "replay_size": int(metrics.replay_size),
        "updates": int(metrics.updates),
        **loss_scale_row(metrics),
    }


class ReplayParts(NamedTuple):
    """The Learner functions of an algorithm whose state holds `env_state` and a `replay` buffer
    (`rlfit.algos.sac.replay`); FastTD3 uses them too."""

    resize: Callable[[Any, jax.Array], Any]
    refill: Callable[[Any], Any]
    stored_rows: Callable[[Any], list[int | None]]
    env_axes: Callable[[Any], Any]


def replay_learner_parts(train_env: Any, settings: Any, filled: Callable[[Any], Any]) -> ReplayParts:
    """`settings`: a config section with SAC's size fields; `filled`: state -> state after the prefill."""

    def resize(state: Any, key: jax.Array) -> Any:
        """New environments and a new, prefilled replay buffer (its layout follows num_envs); the rest kept."""
        env_state = jax.jit(train_env.reset)(key)
        one_obs = jax.tree.map(lambda x: x[0], env_state.inner.obs)
        return filled(state._replace(env_state=env_state, replay=empty_replay(train_env, settings, one_obs)))

    def refill(state: Any) -> Any:
        """The restored buffer marked empty (its rows are zeros) and prefilled again; the rest kept."""
        replay = state.replay
        emptied = replay._replace(final_slot=jax.numpy.full_like(replay.final_slot, -1),
                                  final_position=jax.numpy.zeros_like(replay.final_position),
                                  insert_position=jax.numpy.zeros_like(replay.insert_position),
                                  size=jax.numpy.zeros_like(replay.size))
        return filled(state._replace(replay=emptied))

    def stored_rows(state: Any) -> list[int | None]:
        """The replay buffer's filled rows (all once it has wrapped), its final-observation slots while it holds
        anything; every other leaf whole."""
        replay = state.replay
        rows_filled = int(replay.size)
        slots = 0 if rows_filled == 0 else jax.tree.leaves(replay.final_obs)[0].shape[0]
        stored = {id(leaf): rows_filled for leaf in (*jax.tree.leaves(replay.obs), replay.action, replay.reward,
                                                     replay.discount, replay.final_slot,
                                                     *jax.tree.leaves(replay.episode_step))}
        stored.update({id(leaf): slots for leaf in jax.tree.leaves(replay.final_obs)})
        return [stored.get(id(leaf)) for leaf in jax.tree.leaves(state)]

    def env_axes(state: Any) -> Any:
        """The environments' states along axis 0 and the replay buffer's transitions along their environment axis
        (1: [rows, num_envs, ...]; `final_position` 0), so each device stores the transitions it collects."""
        replay = state.replay
        env_axis = jax.tree.map(lambda _: 1, replay)._replace(final_position=0, insert_position=REPLICATED,
                                                               size=REPLICATED)
        return default_env_axes(state)._replace(replay=env_axis)

    return ReplayParts(resize, refill, stored_rows, env_axes)


def build(config: Any, plan: Any, train_env: Any, obs_example: Any) -> Learner:
    if train_env.action_space.discrete:
        raise UserError(f"algo: sac acts with continuous actions and '{config.env.name}' has "
                        f"{train_env.action_space.describe()}; use algo: ppo (categorical policy) for it")
    sac = sized_config(config.sac, plan.sizes)
    choice = encoder_for(config.network, obs_example, plan.backend)
    encoder = choice.spec if choice is not None else None
    networks = make_sac_networks(obs_example, int(train_env.action_size), sac, plan.precision, encoder,
                                 choice.weights if choice is not None else None)
    optimizers = make_optimizers(sac, encoder is not None, config.network.freeze_encoder)
    prefill = make_prefill(train_env, sac)

    def filled(state: Any) -> Any:
        """`state` after the prefill, which updates the buffer in place (donated: the buffer is not doubled)."""
        return jax.jit(prefill, donate_argnums=0)(state) if sac.min_replay_size > 0 else state

    def init(seed: int) -> Any:
        return filled(init_sac_state(train_env, networks, optimizers, sac, seed, loss_scaling=plan.precision == "fp16"))

    resize, refill, stored_rows, env_axes = replay_learner_parts(train_env, sac, filled)
    return Learner(
        init=init,
        step=make_train_step(train_env, networks, optimizers, sac, steps=plan.sizes.policy_steps_per_iteration),
        metrics_row=metrics_row,
        acting=lambda state: (state.params.policy, state.normalizer),
        policy_logits=networks.policy_logits,
        policy=PolicySpec(tuple(sac.policy_hidden), sac.activation,
                          PIXELS_KEY if encoder is not None else sac.policy_obs_key,
                          encoder.to_dict() if encoder is not None else None, TANH_GAUSSIAN),
        resize=resize,
        stored_rows=stored_rows,
        refill=refill,
        env_axes=env_axes,
        ynn_fusions=False,  # many small matrix products: faster on a CPU without (benchmarks/cpu_compile_options.py)
    )


ALGORITHM = Algorithm(
    name="sac",
    sizes_type=SACSizes,
    config_sizes=config_sizes,
    smaller_sizes=smaller_sizes,
    build=build,
    memory=MEMORY_RULES,
    non_finite_hint="lower sac.learning_rate or set sac.q_layer_norm=true",
)
