"""Nested parameter trees <-> flat {'a/b/c': array} maps: the names under which weights are stored in files."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def flatten_params(params: Any) -> dict[str, np.ndarray]:
    """Nested dict of arrays -> {'a/b/c': float32 array}."""
    if isinstance(params, Mapping):
        return {f"{key}/{sub}" if sub else str(key): value
                for key, child in params.items() for sub, value in flatten_params(child).items()}
    return {"": np.asarray(params, np.float32)}


def unflatten_params(flat: Mapping[str, np.ndarray], separator: str = "/") -> dict[str, Any]:
    """{'a/b/c': array} -> nested dict (names split at `separator`)."""
    nested: dict[str, Any] = {}
    for path, value in flat.items():
        *parents, leaf = path.split(separator)
        node = nested
        for name in parents:
            node = node.setdefault(name, {})
        node[leaf] = value
    return nested
