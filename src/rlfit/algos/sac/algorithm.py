"""SAC behind the algorithm contract: its sizes, presets, rules, back-off and Learner.

An iteration is `policy_steps_per_iteration` policy steps of the `num_envs` environments, each followed by
`grad_updates_per_step` gradient updates: one compiled call, one metrics row. The replay buffer is prefilled
to `min_replay_size` with a uniform random policy (compiled) when the state is created, so the starting
checkpoint already holds it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from rlfit.algos.common.loss_scale import loss_scale_row
from rlfit.algos.contract import Algorithm, Learner, Observation, PolicySpec, RunPlan, Variables
from rlfit.algos.offpolicy.learner import make_filled, replay_learner_parts, sized_config
from rlfit.algos.offpolicy.sizes import ReplaySizes, section_sizes, smaller_sizes
from rlfit.algos.sac.networks import make_sac_networks
from rlfit.algos.sac.planning import MEMORY_RULES
from rlfit.algos.sac.step import SACMetrics, SACState, init_sac_state, make_train_step
from rlfit.algos.sac.update import make_optimizers
from rlfit.envs.pixels import PIXELS_KEY
from rlfit.errors import UserError
from rlfit.networks.heads import TANH_GAUSSIAN
from rlfit.networks.pixels import encoder_for

if TYPE_CHECKING:
    from rlfit.config.schema import Config
    from rlfit.envs.vec_env import VecEnv


def metrics_row(metrics: SACMetrics) -> dict[str, float | int]:
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


def build(config: Config, plan: RunPlan, train_env: VecEnv, obs_example: Observation
          ) -> Learner[SACState, SACMetrics, Variables]:
    if train_env.action_space.discrete:
        raise UserError(f"algo: sac acts with continuous actions and '{config.env.name}' has "
                        f"{train_env.action_space.describe()}; use algo: ppo (categorical policy) for it")
    sizes = cast(ReplaySizes, plan.sizes)  # the plan holds this algorithm's sizes (`ALGORITHM.sizes_type`)
    sac = sized_config(config.sac, sizes)
    choice = encoder_for(config.network, obs_example, plan.backend)
    encoder = choice.spec if choice is not None else None
    networks = make_sac_networks(obs_example, int(train_env.action_size), sac, plan.precision, encoder,
                                 choice.weights if choice is not None else None)
    optimizers = make_optimizers(sac, encoder is not None, config.network.freeze_encoder)
    filled: Callable[[SACState], SACState] = make_filled(train_env, sac)

    def init(seed: int) -> SACState:
        return filled(init_sac_state(train_env, networks, optimizers, sac, seed, loss_scaling=plan.precision == "fp16"))

    resize, refill, stored_rows, env_axes = replay_learner_parts(train_env, sac, filled)
    return Learner(
        init=init,
        step=make_train_step(train_env, networks, optimizers, sac, steps=sizes.policy_steps_per_iteration),
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


ALGORITHM: Algorithm[ReplaySizes, SACState, SACMetrics, Variables] = Algorithm(
    name="sac",
    sizes_type=ReplaySizes,
    config_sizes=lambda config: section_sizes(config.sac),
    smaller_sizes=smaller_sizes,
    build=build,
    memory=MEMORY_RULES,
    non_finite_hint="lower sac.learning_rate or set sac.q_layer_norm=true",
)
