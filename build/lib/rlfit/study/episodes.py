"""One evaluation's episodes, each recorded on its own: what a suite's numbers (means, spreads, standard errors) are
computed from on the host.

    evaluate = make_episode_evaluator(vec_env, act, rate)    # pure; jit it once per suite
    episodes = evaluate(policy arrays, key)                  # Episodes, each field [N] (N = vec_env.num_envs)

Every environment runs one episode from its reset (up to `vec_env.episode_length` policy steps); what happens after
the episode ends is masked out. Success and reference returns are recorded only for environments that define them:
`success_on_termination = True` (a terminal state is a success, as in the gridworld) and
`reference_returns(state, env_steps) -> (optimal [], failing [])` of an episode starting at `state`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from rlfit.envs.vec_env import VecEnv


class Episodes(NamedTuple):
    """Per-episode records of one evaluation; None where the environment or policy does not define the field."""

    returns: jax.Array
    """[N] sum of rewards of each episode."""
    lengths: jax.Array
    """[N] policy steps of each episode."""
    success: jax.Array | None
    """[N] 1.0 where the episode ended in a terminal (success) state."""
    optimal: jax.Array | None
    """[N] the best return the episode's start allows (e.g. a shortest path to the goal)."""
    failing: jax.Array | None
    """[N] the return of an episode that never succeeds (and is never penalized beyond its step costs)."""
    rate_bits: jax.Array | None
    """[N] the policy's description length summed over the episode's visited states (bits per episode)."""


def make_episode_evaluator(env: VecEnv, act: Callable[[Any, Any, jax.Array], jax.Array],
                           rate: Callable[[Any, Any], jax.Array] | None = None
                           ) -> Callable[[Any, jax.Array], Episodes]:
    """(policy arrays, key) -> Episodes over `env.num_envs` episodes; `act(arrays, obs [N, ...], key) -> actions`
    (the key lets a stochastic policy sample), `rate(arrays, obs [N, ...]) -> [N]` bits (None: not measured)."""
    inner = env.env
    success_defined = bool(getattr(inner, "success_on_termination", False))
    references = getattr(inner, "reference_returns", None)

    def evaluate(arrays: Any, key: jax.Array) -> Episodes:
        reset_key, act_key = jax.random.split(key)
        state = env.reset(reset_key)

        def step(carry, step_key):
            state, alive, total, length, bits, success = carry
            obs = state.inner.obs
            if rate is not None:
                bits = bits + rate(arrays, obs) * alive
            state, out = env.step(state, act(arrays, obs, step_key))
            total = total + out.reward * alive
            length = length + alive
            success = success + out.termination * alive
            alive = alive * (1.0 - jnp.maximum(out.termination, out.truncation))
            return (state, alive, total, length, bits, success), None

        ones, zeros = jnp.ones(env.num_envs), jnp.zeros(env.num_envs)
        keys = jax.random.split(act_key, env.episode_length)
        (_, _, total, length, bits, success), _ = jax.lax.scan(step, (state, ones, zeros, zeros, zeros, zeros), keys)
        optimal = failing = None
        if references is not None:
            env_steps = env.episode_length * env.action_repeat
            optimal, failing = jax.vmap(lambda one: references(one, env_steps))(state.inner)
        return Episodes(total, length, success if success_defined else None, optimal, failing,
                        bits if rate is not None else None)

    return evaluate
