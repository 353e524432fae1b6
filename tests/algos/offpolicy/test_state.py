"""A fresh off-policy state's leaves each get their own buffer (donation needs it), its replay buffer untouched."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from rlfit.algos.offpolicy.state import with_own_buffers


class TinyState(NamedTuple):
    """The fields `with_own_buffers` reads: a replay buffer among other leaves."""

    params: Any
    replay: Any
    policy_steps: Any
    grad_steps: Any


def test_shared_leaves_get_their_own_buffers_and_the_replay_buffer_is_kept_as_it_is():
    counter = jnp.zeros((), jnp.int32)  # one buffer in two fields, as the algorithms' initializers make it
    replay = {"obs": jnp.arange(6.0).reshape(3, 2), "reward": jnp.ones(3)}
    state = TinyState({"w": jnp.full((2, 2), 0.5)}, replay, counter, counter)

    owned = with_own_buffers(state)

    assert owned.replay["obs"] is replay["obs"] and owned.replay["reward"] is replay["reward"]
    pointers = [leaf.unsafe_buffer_pointer() for leaf in (owned.params["w"], owned.policy_steps, owned.grad_steps)]
    originals = {state.params["w"].unsafe_buffer_pointer(), counter.unsafe_buffer_pointer()}
    assert len(set(pointers)) == 3 and not set(pointers) & originals
    np.testing.assert_array_equal(owned.params["w"], state.params["w"])
    assert (int(owned.policy_steps), int(owned.grad_steps)) == (0, 0)
