"""Which observation entry a network reads: the configured one, its fallback, or a one-line error."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from rlfit.errors import UserError
from rlfit.networks import select_obs


def test_the_configured_entry_then_the_fallback():
    obs = {"state": jnp.zeros(3), "privileged_state": jnp.ones(5)}
    assert select_obs(obs, "privileged_state").shape == (5,)
    assert select_obs({"state": jnp.zeros(3)}, "privileged_state", "state").shape == (3,)
    assert select_obs(jnp.zeros(4), "state").shape == (4,)  # an array observation is itself


def test_a_missing_entry_is_named_never_silently_replaced():
    with pytest.raises(UserError, match="no entry 'state' \\(it has joints, pixels\\)"):
        select_obs({"pixels": jnp.zeros(3), "joints": jnp.zeros(2)}, "state", "privileged_state")
