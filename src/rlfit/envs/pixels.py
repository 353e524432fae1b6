"""Pixel observations: the observation entry that holds camera frames, and the frame-stack convention.

A pixel environment's observation is a dict with `PIXELS_KEY` -> uint8 [T, H, W, C] (the T most recent frames,
oldest first; a reset fills all T with its first frame) beside the state entries, which stay available to a
critic as privileged input.
"""

from __future__ import annotations

from typing import Any

import numpy as np

PIXELS_KEY = "pixels"


def frame_stack_keys(one_obs: Any) -> tuple[str, ...]:
    """The entries of an unbatched observation that are frame stacks [T, H, W, C] (stored a frame at a time)."""
    if isinstance(one_obs, dict) and PIXELS_KEY in one_obs and np.ndim(one_obs[PIXELS_KEY]) == 4:
        return (PIXELS_KEY,)
    return ()
