"""PPO behind the algorithm contract: its sizes, presets, rules, back-off and Learner (see `rlfit.algos.contract`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rlfit.algos.contract import Algorithm, Learner, Observation, PolicySpec, RunPlan, Variables
from rlfit.algos.ppo.candidates import smaller_sizes as halved
from rlfit.algos.ppo.planning import MEMORY_RULES
from rlfit.algos.ppo.step import IterationMetrics, TrainState, init_train_state, make_optimizer, make_train_iteration
from rlfit.algos.ppo.sizes import BatchSizes, config_sizes
from rlfit.algos.common.loss_scale import loss_scale_row
from rlfit.envs.pixels import PIXELS_KEY
from rlfit.algos.ppo.networks import make_agent
from rlfit.networks.heads import CATEGORICAL, TANH_GAUSSIAN
from rlfit.networks.pixels import encoder_for, encoder_optimizer

if TYPE_CHECKING:
    from rlfit.config.schema import Config
    from rlfit.envs.vec_env import VecEnv


def smaller_sizes(sizes: BatchSizes, where: str = "step") -> BatchSizes | None:
    """Half the environments with the same experience per environment (`rlfit.algos.ppo.candidates`), wherever
    memory ran out."""
    return halved(sizes)


def metrics_row(metrics: IterationMetrics) -> dict[str, float | int]:
    row = {f"loss/{name}": float(value) for name, value in metrics.loss._asdict().items() if value is not None}
    row["grad_norm"] = float(metrics.grad_norm)
    row["updates"] = int(metrics.updates)
    if metrics.learning_rate is not None:
        row["learning_rate"] = float(metrics.learning_rate)
    return {**row, **loss_scale_row(metrics)}


def build(config: Config, plan: RunPlan, train_env: VecEnv, obs_example: Observation
          ) -> Learner[TrainState, IterationMetrics, Variables]:
    sizes = cast(BatchSizes, plan.sizes)  # the plan holds this algorithm's sizes (`ALGORITHM.sizes_type`)
    choice = encoder_for(config.network, obs_example, plan.backend)
    encoder = choice.spec if choice is not None else None
    agent = make_agent(obs_example, train_env.action_space, config.ppo, plan.precision, encoder,
                       choice.weights if choice is not None else None)
    optimizer = make_optimizer(config.ppo, plan.num_iterations)
    if encoder is not None:
        optimizer = encoder_optimizer(optimizer, config.network.freeze_encoder)
    loss_scaling = plan.precision == "fp16"  # fp16 network compute trains with dynamic loss scaling
    ppo = config.ppo
    return Learner(
        init=lambda seed: init_train_state(train_env, agent, optimizer, seed, loss_scaling),
        step=make_train_iteration(train_env, agent, optimizer, ppo, sizes, ppo.bottleneck_beta),
        metrics_row=metrics_row,
        acting=lambda state: (state.params.policy, state.normalizer),
        policy_logits=agent.policy_logits,
        policy_rate=agent.policy_rate,
        deployable=agent.deployable,
        policy=PolicySpec(tuple(ppo.policy_hidden), ppo.activation,
                          PIXELS_KEY if encoder is not None else ppo.policy_obs_key,
                          encoder.to_dict() if encoder is not None else None,
                          CATEGORICAL if train_env.action_space.discrete else TANH_GAUSSIAN),
        resize=lambda state, key: state._replace(env_state=train_env.reset(key)),
    )


ALGORITHM: Algorithm[BatchSizes, TrainState, IterationMetrics, Variables] = Algorithm(
    name="ppo",
    sizes_type=BatchSizes,
    config_sizes=config_sizes,
    smaller_sizes=smaller_sizes,
    build=build,
    memory=MEMORY_RULES,
    non_finite_hint="lower ppo.learning_rate or set ppo.max_grad_norm",
)
