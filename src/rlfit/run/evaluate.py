"""Deterministic evaluation: the action head's deterministic action on separate environments, one episode each."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, TypeVar

import jax
import jax.numpy as jnp

from rlfit.algos.contract import Observation, PyTree
from rlfit.parallel.mesh import split_envs
from rlfit.envs.randomization import field_of
from rlfit.envs.vec_env import EnvState, VecEnv
from rlfit.networks.heads import action_head
from rlfit.algos.common.normalizer import RunningStats, normalize


PolicyT = TypeVar("PolicyT")
PolicyOutput = Callable[[PyTree, Observation], jax.Array]
"""(policy params, normalized obs [N, ...]) -> the policy network's output [N, ...] (or its rate [N])."""
EpisodesCarry = tuple[EnvState, jax.Array, jax.Array, jax.Array, jax.Array]
"""(environment states, alive [N], return [N], length [N], measured [N]) while the episodes run."""


def eval_key(seed: int, iteration: int) -> jax.Array:
    """The evaluation key for an iteration: a pure function of seed and iteration, so resume repeats it."""
    return jax.random.fold_in(jax.random.PRNGKey(seed ^ 0x5EED), iteration)


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



Evaluation = Callable[[PyTree, RunningStats, jax.Array], EvalMetrics]
"""An evaluation of a trained policy: (policy params, observation statistics, key) -> EvalMetrics."""

def make_paired_evaluator(nominal_env: VecEnv, randomized_env: VecEnv, policy_logits: PolicyOutput,
                          policy_rate: PolicyOutput | None = None, head: str | None = None
                          ) -> Evaluation:
    """(policy params, stats, key) -> EvalMetrics of `nominal_env`'s N episodes on the nominal model, with
    `randomized` the same figures of `randomized_env`'s N episodes on models it draws (`randomized_env.randomizer`),
    both in one rollout of 2N environments: the nominal ones step on the nominal model's values of the randomized
    fields, so the program holds one copy of the environment's step instead of two (G1's evaluation, `--preset g1`,
    compiled in 73.1 s instead of 87.6 s on a 2-core CPU: benchmarks/README.md, eval_compile.py), and one reset of
    the 2N environments instead of two. Each side starts from the keys it would alone (to float32 rounding: the
    nominal side resets on the nominal values as a batch): the nominal episodes from `key`, the randomized models and
    episodes from `key` with RANDOMIZED_EVAL_STREAM folded in (never training's key, drawn afresh at every
    evaluation). `policy_rate` (as in `make_evaluator`) is measured on the nominal episodes."""
    if randomized_env.randomizer is None or nominal_env.num_envs != randomized_env.num_envs:
        raise ValueError("make_paired_evaluator needs a randomized environment of the nominal one's size")
    count = nominal_env.num_envs
    both = VecEnv(randomized_env.env, 2 * count, randomized_env.episode_length, randomized_env.action_repeat,
                  randomized_env.randomizer)
    act, measure = acting(both, policy_logits, policy_rate, head)

    def evaluate(policy_params: PyTree, stats: RunningStats, key: jax.Array) -> EvalMetrics:
        start_keys, reset_keys, drawn = randomized_env.reset_inputs(jax.random.fold_in(key, RANDOMIZED_EVAL_STREAM))
        assert drawn is not None
        nominal_start_keys, nominal_reset_keys, _ = nominal_env.reset_inputs(key)
        nominal_models = {
            path: jnp.broadcast_to(jnp.asarray(field_of(nominal_env.env.mjx_model, path), values.dtype), values.shape)
            for path, values in drawn.items()}
        start = both.start(*jax.tree.map(lambda a, b: jnp.concatenate([a, b]),
                                         (nominal_start_keys, nominal_reset_keys, nominal_models),
                                         (start_keys, reset_keys, drawn)))
        total, length, measured = episodes(both, act, measure, (policy_params, stats), start)
        first, second = slice(0, count), slice(count, 2 * count)
        rate = mean_rate(measured[first], length[first]) if measure is not None else None
        return metrics(total[first], length[first], rate)._replace(randomized=metrics(total[second], length[second]))

    return evaluate


def randomized_row(result: EvalMetrics) -> dict[str, float]:
    """The metrics.jsonl fields of a (host) evaluation on randomized models: `eval/randomized/...`; {} without."""
    if result.randomized is None:
        return {}
    other = result.randomized
    return {"eval/randomized/episode_reward": float(other.episode_reward),
            "eval/randomized/episode_reward_std": float(other.episode_reward_std),
            "eval/randomized/episode_length": float(other.episode_length)}


def make_evaluator(env: VecEnv, policy_logits: PolicyOutput,
                   policy_rate: PolicyOutput | None = None, head: str | None = None
                   ) -> Evaluation:
    """(policy params, stats, key) -> EvalMetrics over `env.num_envs` episodes of up to `episode_length` steps.

    `policy_logits(policy params, normalized obs) -> [..., size]` (any algorithm's acting network) is read by the
    action head `head` (`rlfit.networks.heads`, e.g. `Learner.policy.head`; None: the action space's stochastic
    head): the action is its deterministic one (tanh(mean), tanh(output), or the most likely discrete action).
    With `policy_rate(policy params, normalized obs) -> [N]` bits, its mean over the visited states is measured.
    """
    act, measure = acting(env, policy_logits, policy_rate, head)
    evaluate_actions = make_action_evaluator(env, act, measure)
    return lambda policy_params, stats, key: evaluate_actions((policy_params, stats), key)


Acting = Callable[[PolicyT, Observation], jax.Array]
"""(policy, obs [N, ...]) -> actions [N, A] (or a measure [N]); `policy` is what the evaluation was given, for a
trained policy (policy params, RunningStats)."""
Policy = tuple[PyTree, RunningStats]
"""A trained policy as the evaluation acts with it: (policy params, observation statistics)."""


def acting(env: VecEnv, policy_logits: PolicyOutput,
           policy_rate: PolicyOutput | None, head: str | None) -> tuple[Acting[Policy], Acting[Policy] | None]:
    """(the deterministic action of `head` on normalized observations, the policy's rate on them or None), each a
    function of ((policy params, stats), obs): what `make_evaluator` documents."""
    mode = action_head(head, env.action_space).mode

    def act(policy: Policy, obs: Observation) -> jax.Array:
        policy_params, stats = policy
        return mode(policy_logits(policy_params, normalize(stats, obs)))

    if policy_rate is None:
        return act, None

    def rate(policy: Policy, obs: Observation) -> jax.Array:
        policy_params, stats = policy
        return policy_rate(policy_params, normalize(stats, obs))

    return act, rate


def make_action_evaluator(env: VecEnv, act: Acting[PolicyT], measure: Acting[PolicyT] | None = None
                          ) -> Callable[[PolicyT, jax.Array], EvalMetrics]:
    """(policy, key) -> EvalMetrics over `env.num_envs` episodes, `act(policy, obs) -> action [num_envs, A]`
    choosing each action (a saved policy: `lambda _, obs: load_policy(path)(obs)`); with `measure(policy, obs)
    -> [num_envs]`, its mean over the states the episodes visited is `rate_bits`."""

    def evaluate(policy: PolicyT, key: jax.Array) -> EvalMetrics:
        total, length, measured = episodes(env, act, measure, policy, env.reset(key))
        return metrics(total, length, mean_rate(measured, length) if measure is not None else None)

    return evaluate


def episodes(env: VecEnv, act: Acting[PolicyT], measure: Acting[PolicyT] | None, policy: PolicyT, start: EnvState
             ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(return [N], length [N], the sum of `measure` over the steps of each episode [N]; zeros without one) of one
    episode in each of `env`'s N environments from `start` (reset states), `act` choosing every action."""

    def step(carry: EpisodesCarry, _: None) -> tuple[EpisodesCarry, None]:
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
    carry = split_envs((start, ones, zeros, zeros, zeros), 0)  # over several devices: each its share
    (_, _, total, length, measured), _ = jax.lax.scan(step, carry, None, length=env.episode_length)
    return total, length, measured


def mean_rate(measured: jax.Array, length: jax.Array) -> jax.Array:
    """[] the mean of a measure over every step of N episodes, from its per-episode sums and lengths [N]."""
    return jnp.sum(measured) / jnp.maximum(jnp.sum(length), 1.0)


def metrics(total: jax.Array, length: jax.Array, rate: jax.Array | None = None) -> EvalMetrics:
    """EvalMetrics of N episodes' returns and lengths [N]."""
    return EvalMetrics(jnp.mean(total), jnp.std(total), jnp.mean(length), rate)
