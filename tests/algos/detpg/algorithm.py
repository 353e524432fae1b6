"""detpg behind the algorithm contract: sizes, memory rules, the Learner.

One iteration: every environment acts `unroll_length` steps with a = clip(tanh(actor(obs)) + noise); the
discounted returns-to-go, normalized over the batch, weight the Gaussian log-likelihood of the actions taken;
one Adam step. The actor is acted on deterministically (`deterministic_tanh`): action = tanh(actor(obs)).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from rlfit.algos.contract import Algorithm, Learner, MemoryRules, PolicySpec
from rlfit.envs.vec_env import EnvState
from rlfit.networks import MLP, select_obs
from rlfit.networks.heads import DETERMINISTIC_TANH
from rlfit.algos.common.normalizer import RunningStats, init_stats, normalize, update_stats


class DetPGSizes(NamedTuple):
    num_envs: int
    unroll_length: int

    @property
    def steps_per_iteration(self) -> int:
        return self.num_envs * self.unroll_length


class DetPGState(NamedTuple):
    params: Any
    opt_state: Any
    normalizer: RunningStats
    env_state: EnvState
    key: jax.Array


class DetPGMetrics(NamedTuple):
    loss: jax.Array
    all_finite: jax.Array
    episodes_finished: jax.Array
    episode_return_sum: jax.Array
    episode_length_sum: jax.Array


class Batch(NamedTuple):
    """[T, N] experience of one iteration."""

    obs: Any
    action: jax.Array
    reward: jax.Array
    done: jax.Array
    finished_return: jax.Array
    finished_length: jax.Array


def config_sizes(config: Any) -> DetPGSizes:
    return DetPGSizes(config.detpg.num_envs, config.detpg.unroll_length)


def smaller_sizes(sizes: DetPGSizes, where: str = "step") -> DetPGSizes | None:
    return sizes._replace(num_envs=sizes.num_envs // 2) if sizes.num_envs > 1 else None


def returns_to_go(reward: jax.Array, done: jax.Array, discount: float) -> jax.Array:
    """[T, N] discounted returns within each episode (cut where `done`)."""
    def back(following, step):
        r, d = step
        value = r + discount * following * (1.0 - d)
        return value, value

    return jax.lax.scan(back, jnp.zeros_like(reward[0]), (reward, done), reverse=True)[1]


def build(config: Any, plan: Any, train_env: Any, obs_example: Any) -> Learner:
    section = config.detpg
    actor = MLP(tuple(section.hidden) + (train_env.action_size,), section.activation)
    optimizer = optax.adam(section.learning_rate)

    def policy_logits(params: Any, obs: Any) -> jax.Array:
        return actor.apply(params, select_obs(obs, section.policy_obs_key))

    def init(seed: int) -> DetPGState:
        key, params_key, env_key = jax.random.split(jax.random.PRNGKey(seed), 3)
        params = actor.init(params_key, select_obs(obs_example, section.policy_obs_key))
        state = DetPGState(params, optimizer.init(params), init_stats(obs_example), jax.jit(train_env.reset)(env_key),
                           key)
        return jax.tree.map(lambda x: jnp.array(x, copy=True), state)

    def collect(state: DetPGState, key: jax.Array) -> tuple[EnvState, Batch]:
        def act(env_state: EnvState, step_key: jax.Array) -> tuple[EnvState, Batch]:
            obs = env_state.inner.obs
            mean = jnp.tanh(policy_logits(state.params, normalize(state.normalizer, obs)))
            action = jnp.clip(mean + section.exploration_std * jax.random.normal(step_key, mean.shape), -1.0, 1.0)
            env_state, out = train_env.step(env_state, action)
            done = jnp.maximum(out.termination, out.truncation)
            return env_state, Batch(obs, action, out.reward, done, out.finished_return, out.finished_length)

        return jax.lax.scan(act, state.env_state, jax.random.split(key, section.unroll_length))

    def step(state: DetPGState) -> tuple[DetPGState, DetPGMetrics]:
        key, collect_key = jax.random.split(state.key)
        env_state, batch = collect(state, collect_key)
        stats = update_stats(state.normalizer, batch.obs)
        returns = returns_to_go(batch.reward, batch.done, section.discounting)
        advantage = (returns - returns.mean()) / (returns.std() + 1e-6)

        def loss(params: Any) -> jax.Array:
            mean = jnp.tanh(policy_logits(params, normalize(state.normalizer, batch.obs)))
            log_likelihood = -0.5 * jnp.sum(((batch.action - mean) / section.exploration_std) ** 2, axis=-1)
            return -jnp.mean(advantage * log_likelihood)

        value, grads = jax.value_and_grad(loss)(state.params)
        updates, opt_state = optimizer.update(grads, state.opt_state)
        params = optax.apply_updates(state.params, updates)
        finite = jnp.isfinite(value) & jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(params)]))
        finished = batch.finished_length > 0
        metrics = DetPGMetrics(value, finite, jnp.sum(finished), jnp.sum(batch.finished_return),
                               jnp.sum(batch.finished_length))
        return DetPGState(params, opt_state, stats, env_state, key), metrics

    return Learner(
        init=init,
        step=step,
        metrics_row=lambda metrics: {"loss/policy": float(metrics.loss)},
        acting=lambda state: (state.params, state.normalizer),
        policy_logits=policy_logits,
        policy=PolicySpec(tuple(section.hidden), section.activation, section.policy_obs_key, None, DETERMINISTIC_TANH),
        resize=lambda state, key: state._replace(env_state=train_env.reset(key)),
    )


def choose(config: Any, judge: Any, most_envs: int | None) -> Any:
    """The config's sizes and their halvings; the largest that fits."""
    from rlfit.algos.contract import Choice

    sizes, candidates = config_sizes(config), []
    while sizes is not None:
        candidates.insert(0, judge(sizes))
        sizes = smaller_sizes(sizes)
    fitting = [candidate for candidate in candidates if candidate.fits]
    return Choice(tuple(candidates), fitting[-1] if fitting else None, ("the largest num_envs that fits",),
                  candidates[0], "lower detpg.num_envs")


ALGORITHM = Algorithm(
    name="detpg",
    sizes_type=DetPGSizes,
    config_sizes=config_sizes,
    smaller_sizes=smaller_sizes,
    build=build,
    memory=MemoryRules(
        columns=("num_envs",),
        measured_sizes=lambda config, cap: (config_sizes(config)._replace(num_envs=4),
                                              config_sizes(config)._replace(num_envs=8)),
        stored_transitions=lambda sizes: 0,
        choose=choose,
    ),
    non_finite_hint="lower detpg.learning_rate",
)
