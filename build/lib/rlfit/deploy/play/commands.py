"""`--command VX,VY,WZ`: hold a joystick environment's velocity command fixed while playing.

Playground's joystick environments (G1, Go1, H1, T1, Berkeley Humanoid, Spot, ...) draw their command in
`sample_command(rng) -> [3]` at reset and again during an episode, and put it in `state.info["command"]`,
which the observation includes. Replacing `sample_command` on the environment instance makes reset, the
observation and every resample use the given command.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlfit.errors import UserError


def parse_command(text: str) -> tuple[float, float, float]:
    """'0.5,0,0.2' -> (0.5, 0.0, 0.2): forward m/s, sideways m/s, yaw rad/s."""
    parts = [part.strip() for part in text.split(",")]
    try:
        values = tuple(float(part) for part in parts)
    except ValueError:
        values = ()
    if len(values) != 3 or not all(np.isfinite(values)):
        raise UserError(f"--command expects three numbers VX,VY,WZ (m/s, m/s, rad/s), e.g. 0.5,0,0; got '{text}'")
    return values  # type: ignore[return-value]


def hold_command(env: Any, env_name: str, command: tuple[float, float, float]) -> None:
    """Makes `env` use `command` wherever it would sample one; UserError when it takes no command."""
    sample = getattr(env, "sample_command", None)
    if not callable(sample):
        raise UserError(f"--command: {env_name} takes no velocity command (it has no sample_command); "
                        "drop --command")
    import jax
    import jax.numpy as jnp

    shape = jax.eval_shape(sample, jax.ShapeDtypeStruct((2,), jnp.uint32))
    if tuple(shape.shape) != (3,):
        raise UserError(f"--command: {env_name}'s command has shape {tuple(shape.shape)}, not (3,) (VX, VY, WZ)")
    fixed = jnp.asarray(command, shape.dtype)
    env.sample_command = lambda rng: fixed
