"""Action heads: how a policy network's outputs become the deterministic action that evaluation, the policy
file, play and export take. An algorithm names its head in `PolicySpec.head`; the policy file records it.

    head                outputs [..., size]                 deterministic action
    tanh_gaussian       2 * A: mean, raw scale              tanh(mean)               [..., A] in [-1, 1]
    deterministic_tanh  A: pre-tanh action                  tanh(outputs)            [..., A] in [-1, 1]
    categorical         K: logits                           argmax(log_softmax)      [...] int32 in [0, K)
    q_argmax            K: action values Q(s, a)            argmax(Q)                [...] int32 in [0, K)

Pure functions of arrays; no training code (sampling, log-probabilities and losses stay with the algorithms).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from rlfit.envs.action_space import ActionSpace

if TYPE_CHECKING:
    import jax

TANH_GAUSSIAN = "tanh_gaussian"
DETERMINISTIC_TANH = "deterministic_tanh"
CATEGORICAL = "categorical"
Q_ARGMAX = "q_argmax"


class ActionHead(NamedTuple):
    """One way of reading a policy network's outputs."""

    name: str
    discrete: bool
    """Whether it acts on discrete actions (an int32 index) rather than continuous ones in [-1, 1]."""
    output_size: Callable[[int], int]
    """The action space's size (A or K) -> the width of the network's output."""
    mode: Callable[[jax.Array], jax.Array]
    """outputs [..., output_size] -> the deterministic action ([..., A] float32, or [...] int32)."""
    description: str
    """What the outputs are and how the action follows, as policy.json states it."""


def _tanh_of_mean(outputs: jax.Array) -> jax.Array:
    import jax.numpy as jnp

    return jnp.tanh(jnp.split(outputs, 2, axis=-1)[0])


def _tanh(outputs: jax.Array) -> jax.Array:
    import jax.numpy as jnp

    return jnp.tanh(outputs)


def _most_likely(outputs: jax.Array) -> jax.Array:
    import jax
    import jax.numpy as jnp

    return jnp.argmax(jax.nn.log_softmax(outputs.astype(jnp.float32), axis=-1), axis=-1).astype(jnp.int32)


def _largest(outputs: jax.Array) -> jax.Array:
    import jax.numpy as jnp

    return jnp.argmax(outputs.astype(jnp.float32), axis=-1).astype(jnp.int32)


HEADS: dict[str, ActionHead] = {head.name: head for head in (
    ActionHead(TANH_GAUSSIAN, False, lambda size: 2 * size, _tanh_of_mean,
               "first half: mean of a Gaussian over raw actions; action = tanh(mean) in [-1, 1]"),
    ActionHead(DETERMINISTIC_TANH, False, lambda size: size, _tanh,
               "the raw action; action = tanh(output) in [-1, 1]"),
    ActionHead(CATEGORICAL, True, lambda size: size, _most_likely,
               "logits of a categorical over the actions; action = argmax"),
    ActionHead(Q_ARGMAX, True, lambda size: size, _largest,
               "the value Q(obs, a) of each action; action = argmax"),
)}


def default_head_name(space: ActionSpace) -> str:
    """The head a policy has when nothing names one (policy files written before heads were recorded): the
    stochastic policy of the action space, tanh_gaussian for continuous actions, categorical for discrete ones."""
    return CATEGORICAL if space.discrete else TANH_GAUSSIAN


def action_head(name: str | None, space: ActionSpace) -> ActionHead:
    """The head called `name` (None: `default_head_name(space)`), checked against the action space; a UserError
    for an unknown name or a discrete head on continuous actions (and the other way round)."""
    from rlfit.errors import UserError

    name = name or default_head_name(space)
    if name not in HEADS:
        raise UserError(f"unknown action head '{name}' (this rlfit knows {', '.join(HEADS)}); upgrade rlfit")
    head = HEADS[name]
    if head.discrete != space.discrete:
        raise UserError(f"the action head '{name}' acts on {'discrete' if head.discrete else 'continuous'} actions "
                        f"but the environment has {space.describe()}")
    return head
