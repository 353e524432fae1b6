"""What identifies an environment's physics beyond its name: a digest of its compiled MuJoCo model."""

from __future__ import annotations

import hashlib
from typing import Any


def model_digest(env: Any) -> str | None:
    """A digest of `env.mj_model` as MuJoCo saves it (the same model file and assets give the same digest; an
    edited asset or another copy of the Menagerie gives another); None for an environment without a MuJoCo model
    (gridworlds, gymnax)."""
    model = getattr(env, "mj_model", None)
    if model is None:
        return None
    import mujoco
    import numpy as np

    saved = np.zeros(mujoco.mj_sizeModel(model), np.uint8)
    mujoco.mj_saveModel(model, None, saved)
    return hashlib.sha256(saved.tobytes()).hexdigest()
