"""Deterministic evaluation: the action head's deterministic action on separate environments, one episode each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from rlfit.parallel.mesh import split_envs
from rlfit.envs.vec_env import VecEnv
from rlfit.networks.heads import action_head
from rlfit.algos.common.normalizer import RunningStats, normalize


class EvalMetrics(NamedTuple):
    """What one evaluation measured."""

    episode_reward: jax.Array
    """[] mean return over the evaluation environments."""
    episode_reward_std: jax.Array
    episode_length: jax.Array
    rate_bits: jax.Array | None = None
    """[] the policy's mean description length of an observation (bits, over every state the evaluation
    episodes visited: `Learner.policy_rate`); None where the policy defines none."""
    randomized: EvalMetrics | None = None
    """With domain randomization: the same figures on freshly drawn models (the fields above are the nominal
    model's); None without."""


RANDOMIZED_EVAL_STREAM = 1
"""Folded into the evaluation's key for the randomized evaluation's key: its models and episodes."""


def with_randomized(nominal: Callable[[Any, RunningStats, jax.Array], EvalMetrics],
                    randomized: Callable[[Any, RunningStats, jax.Array], EvalMetrics]
                    ) -> Callable[[Any, RunningStats, jax.Array], EvalMetrics]:
    """One evaluation of both: `nominal` from the key, `randomized` (environments that draw their models at reset)
    from the key with RANDOMIZED_EVAL_STREAM folded in, so its models are drawn afresh at every evaluation and
    never from training's key."""

    def evaluate(policy_params: Any, stats: RunningStats, key: jax.Array) -> EvalMetrics:
        other = randomized(policy_params, stats, jax.random.fold_in(key, RANDOMIZED_EVAL_STREAM))
        return nominal(policy_params, stats, key)._replace(randomized=other)

    return evaluate


def randomized_row(result: EvalMetrics) -> dict[str, float]:
    """The metrics.jsonl fields of a (host) evaluation on randomized models: `eval/randomized/...`; {} without."""
    if result.randomized is None:
        return {}
    other = result.randomized
    return {"eval/randomized/episode_reward": float(other.episode_reward),
            "eval/randomized/episode_reward_std": float(other.episode_reward_std),
            "eval/randomized/episode_length": float(other.episode_length)}


def make_evaluator(env: VecEnv, policy_logits: Callable[[Any, Any], jax.Array],
                   policy_rate: Callable[[Any, Any], jax.Array] | None = None, head: str | None = None
                   ) -> Callable[[Any, RunningStats, jax.Array], EvalMetrics]:
    """(policy params, stats, key) -> EvalMetrics over `env.num_envs` episodes of up to `episode_length` steps.

    `policy_logits(policy params, normalized obs) -> [..., size]` (any algorithm's acting network) is read by the
    action head `head` (`rlfit.networks.heads`, e.g. `Learner.policy.head`; None: the action space's stochastic
    head): the action is its deterministic one (tanh(mean), tanh(output), or the most likely discrete action).
    With `policy_rate(policy params, normalized obs) -> [N]` bits, its mean over the visited states is measured.
    """
    mode = action_head(head, env.action_space).mode

    def act(policy: tuple[Any, RunningStats], obs: Any) -> jax.Array:
        policy_params, stats = policy
        return mode(policy_logits(policy_params, normalize(stats, obs)))

    measure = None
    if policy_rate is not None:
        def rate(policy: tuple[Any, RunningStats], obs: Any) -> jax.Array:
            policy_params, stats = policy
            return policy_rate(policy_params, normalize(stats, obs))

        measure = rate
    evaluate_actions = make_action_evaluator(env, act, measure)
    return lambda policy_params, stats, key: evaluate_actions((policy_params, stats), key)


def make_action_evaluator(env: VecEnv, act: Callable[[Any, Any], jax.Array],
                          measure: Callable[[Any, Any], jax.Array] | None = None
                          ) -> Callable[[Any, jax.Array], EvalMetrics]:
    """(policy, key) -> EvalMetrics over `env.num_envs` episodes, `act(policy, obs) -> action [num_envs, A]`
    choosing each action (a saved policy: `lambda _, obs: load_policy(path)(obs)`); with `measure(policy, obs)
    -> [num_envs]`, its mean over the states the episodes visited is `rate_bits`."""

    def evaluate(policy: Any, key: jax.Array) -> EvalMetrics:
        def step(carry, _):
            state, alive, total, length, measured = carry
            obs = state.inner.obs
            counts = alive > 0
            if measure is not None:
                measured = measured + jnp.where(counts, measure(policy, obs), 0.0)
            # No reset: an environment whose episode ended steps on from its end, unread (whatever it computes,
            # NaN included, is masked out), and the program is smaller by the environment's reset.
            state, out = env.step(state, act(policy, obs), auto_reset=False)
            total = total + jnp.where(counts, out.reward, 0.0)
            length = length + alive
            alive = jnp.where(counts & (jnp.maximum(out.termination, out.truncation) == 0), 1.0, 0.0)
            return split_envs((state, alive, total, length, measured), 0), None

        ones, zeros = jnp.ones(env.num_envs), jnp.zeros(env.num_envs)
        carry = split_envs((env.reset(key), ones, zeros, zeros, zeros), 0)  # over several devices: each its share
        (_, _, total, length, measured), _ = jax.lax.scan(step, carry, None, length=env.episode_length)
        rate = jnp.sum(measured) / jnp.maximum(jnp.sum(length), 1.0) if measure is not None else None
        return EvalMetrics(jnp.mean(total), jnp.std(total), jnp.mean(length), rate)

    return evaluate
