"""Checksums of arrays computed where their shards live (`rlfit.checkpoints.fingerprint`): against a NumPy computation of
the documented formula, sensitive to one changed or moved element, and the same however an array is split."""

from __future__ import annotations

import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.checkpoints import fingerprint
from rlfit.checkpoints.fingerprint import LANE_SEEDS, fingerprints
from tests.conftest import REPO_ROOT, cli_environment


def reference(leaf: np.ndarray, rows: int) -> str:
    """The module docstring's formula in NumPy, element by element in C order."""
    if leaf.dtype == np.bool_:
        words = leaf.astype(np.uint32)
    else:
        size = leaf.dtype.itemsize
        words = leaf.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint32}[size]).astype(np.uint32)
        if size == 8:
            words = words.reshape(leaf.shape + (2,))
    flat = words.reshape(-1).astype(np.uint64)
    per_row = int(np.prod(words.shape[1:])) if words.ndim else 1
    counted = flat.size if leaf.ndim == 0 else rows * per_row

    def mix(h):
        h = h & 0xFFFFFFFF
        h ^= h >> 16
        h = (h * 0x85EBCA6B) & 0xFFFFFFFF
        h ^= h >> 13
        h = (h * 0xC2B2AE35) & 0xFFFFFFFF
        return h ^ (h >> 16)

    position = np.arange(flat.size, dtype=np.uint64)
    lanes = [int(np.sum(mix(mix(position + seed) ^ flat)[:counted]) & 0xFFFFFFFF) for seed in LANE_SEEDS]
    return f"{lanes[0]:08x}{lanes[1]:08x}"


def leaves() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.normal(size=(5, 3)).astype(np.float32), rng.integers(0, 256, (6, 4, 4, 3), dtype=np.uint8),
            rng.normal(size=(7,)).astype(np.float16), rng.integers(-5, 5, (4, 2), dtype=np.int32),
            np.array([True, False, True]), np.array([7, 9], np.uint32), np.array(3.5, np.float32),
            np.zeros((4, 0), np.float32)]


@pytest.mark.parametrize("separate_words", [fingerprint.SEPARATE_WORDS, 1])
def test_fingerprints_follow_the_documented_formula_for_every_dtype_and_row_count(monkeypatch, separate_words):
    """Hashed together in one pass (the small leaves of a state) or each leaf in its own (the large ones)."""
    monkeypatch.setattr(fingerprint, "SEPARATE_WORDS", separate_words)  # read per call: a static argument
    arrays = leaves()
    rows = [5, 2, 7, 0, 3, 2, 1, 4]
    assert fingerprints([jnp.asarray(a) for a in arrays], rows) == [reference(a, r) for a, r in zip(arrays, rows)]


def test_one_changed_or_moved_element_changes_the_fingerprint_and_rows_past_the_count_do_not():
    base = np.arange(24, dtype=np.float32).reshape(6, 4)
    changed = base.copy()
    changed[2, 1] = np.nextafter(changed[2, 1], np.float32(100))  # one bit
    swapped = base.copy()
    swapped[[0, 1]] = swapped[[1, 0]]
    tail = base.copy()
    tail[5] = -1.0
    got = fingerprints([jnp.asarray(a) for a in (base, changed, swapped, tail)], [5, 5, 5, 5])
    assert len({got[0], got[1], got[2]}) == 3
    assert got[3] == got[0]  # row 5 is not counted


SPLIT = """
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from rlfit.checkpoints import fingerprint
from rlfit.checkpoints.fingerprint import fingerprints
rng = np.random.default_rng(1)
buffer = rng.integers(0, 256, (8, 4, 6, 6, 3), dtype=np.uint8)   # [rows, envs, H, W, C]
params = rng.normal(size=(16, 8)).astype(np.float32)
results = []
for count in (1, 2, 4):
    mesh = Mesh(np.array(jax.devices()[:count]), ("envs",))
    split = jax.device_put(buffer, NamedSharding(mesh, P(None, "envs")))
    rows_split = jax.device_put(params, NamedSharding(mesh, P("envs")))
    assert len(split.addressable_shards) == count
    results.append(fingerprints([split, rows_split], [5, 16]))
    default, fingerprint.SEPARATE_WORDS = fingerprint.SEPARATE_WORDS, 1  # each leaf in its own pass, as a large one
    results.append(fingerprints([split, rows_split], [5, 16]))
    fingerprint.SEPARATE_WORDS = default
print(results)
assert len(results) == 6 and all(result == results[0] for result in results)
"""


def test_the_fingerprint_is_the_same_on_one_two_and_four_devices_in_one_pass_or_per_leaf():
    env = {**cli_environment(), "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    done = subprocess.run([sys.executable, "-c", SPLIT], env=env, cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
