"""The checkpoint format on its own: round trip, empty arrays, checksums, structure checks, pruning, format 1."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.checkpoints.format import CorruptCheckpoint, list_steps, load_checkpoint, prune, save_checkpoint


def state_like():
    # An empty array, as MJX data holds for contacts on some models; integers, a key, nesting.
    return {"params": {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}, "contacts": np.zeros((4, 0), np.float32),
            "key": np.array([7, 9], np.uint32), "step": np.array(3, np.int32)}


def meta(iteration: int, reward=None) -> dict:
    return {"iteration": iteration, "env_steps": 10 * iteration, "progress": {"eval_reward_at_save": reward},
            "config": {}, "plan": {}, "versions": {}}


def test_round_trip_restores_every_leaf_exactly(tmp_path):
    state = state_like()
    save_checkpoint(tmp_path, state, meta(5))
    restored, info = load_checkpoint(tmp_path, 5, state)
    assert info.iteration == 5 and info.env_steps == 50
    for name in state:
        got, want = np.asarray(restored[name] if name != "params" else restored["params"]["w"]), \
            state[name] if name != "params" else state["params"]["w"]
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_a_changed_record_fails_the_checksum(tmp_path):
    state = state_like()
    save_checkpoint(tmp_path, state, meta(1))
    meta_path = tmp_path / "00000001" / "meta.json"
    saved = json.loads(meta_path.read_text())
    saved["arrays"][-1]["checksum"] = "f" * 16
    meta_path.write_text(json.dumps(saved))
    with pytest.raises(CorruptCheckpoint, match="meta.json fails its checksum"):
        load_checkpoint(tmp_path, 1, state)


def test_arrays_that_differ_from_the_ones_saved_fail_their_checksum(tmp_path):
    """Readable arrays of the right shapes but other values (here another save's) are caught by the checksum."""
    state = state_like()
    save_checkpoint(tmp_path, state, meta(1))
    other = dict(state_like(), params={"w": np.arange(6, dtype=np.float32).reshape(2, 3)[::-1].copy()})
    save_checkpoint(tmp_path, other, meta(2))
    shutil.rmtree(tmp_path / "00000001" / "state")
    shutil.copytree(tmp_path / "00000002" / "state", tmp_path / "00000001" / "state")
    with pytest.raises(CorruptCheckpoint, match=r"array \d+ \(2, 3\) fails its checksum"):
        load_checkpoint(tmp_path, 1, state)
    load_checkpoint(tmp_path, 2, other)  # its own record accepts it


def test_a_different_structure_is_refused(tmp_path):
    save_checkpoint(tmp_path, state_like(), meta(1))
    other = dict(state_like(), params={"w": jnp.zeros((3, 3), jnp.float32)})
    with pytest.raises(CorruptCheckpoint, match=r"\(3, 3\)"):
        load_checkpoint(tmp_path, 1, other)
    with pytest.raises(CorruptCheckpoint, match="arrays"):
        load_checkpoint(tmp_path, 1, dict(state_like(), extra=np.ones(2, np.float32)))


def test_prune_keeps_the_newest_and_the_best(tmp_path):
    for iteration, reward in [(1, 5.0), (2, 50.0), (3, 7.0), (4, 8.0), (5, None)]:
        save_checkpoint(tmp_path, state_like(), meta(iteration, reward))
    assert prune(tmp_path, keep_last=2) == [2, 4, 5]
    assert list_steps(tmp_path) == [2, 4, 5]


def test_leaves_saved_up_to_their_filled_rows_are_restored_exactly(tmp_path):
    ring = np.full((100, 3), -1, np.int32)
    ring[:4] = np.arange(12).reshape(4, 3)
    noisy = np.zeros((100, 2), np.float32)
    noisy[:4], noisy[50] = 1.0, 7.0  # a row past the filled ones differs: this leaf must be saved whole
    state = {"ring": ring, "noisy": noisy, "empty_ring": np.zeros((100, 2), np.float32)}
    leaves_order = sorted(state)  # jax flattens dicts by key: empty_ring, noisy, ring
    rows = {"empty_ring": 0, "noisy": 4, "ring": 4}
    save_checkpoint(tmp_path, state, meta(1), stored_rows=[rows[name] for name in leaves_order])
    recorded = json.loads((tmp_path / "00000001" / "meta.json").read_text())["trimmed"]
    assert recorded == {"0": {"rows": 100, "stored": 0, "fill": 0.0}, "2": {"rows": 100, "stored": 4, "fill": -1}}
    restored, _ = load_checkpoint(tmp_path, 1, state)
    for name in state:
        np.testing.assert_array_equal(np.asarray(restored[name]), state[name])
        assert np.asarray(restored[name]).dtype == state[name].dtype


FORMAT_1 = Path(__file__).parent / "data" / "format1"
"""A checkpoint written by rlfit's format-1 code (e4cd7d4's `save_checkpoint`: whole arrays, a sha256 of their
bytes; its `ring` saved up to its 4 filled rows), kept as written."""


def test_a_checkpoint_of_format_1_still_loads_exactly_and_its_checksum_is_still_checked(tmp_path):
    ring = np.full((10, 3), -1, np.int32)
    ring[:4] = np.arange(12).reshape(4, 3)
    state = dict(state_like(), ring=ring)
    restored, info = load_checkpoint(FORMAT_1, 7, state)
    assert info.format_version == 1 and info.iteration == 7 and info.trimmed == {"3": {"rows": 10, "fill": -1}}
    for want, got in zip(jax.tree.leaves(state), jax.tree.leaves(restored)):
        assert np.asarray(got).dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), want)
    tampered = tmp_path / "format1"
    shutil.copytree(FORMAT_1, tampered)
    record = json.loads((tampered / "00000007" / "meta.json").read_text())
    record["checksum"] = "0" * 64
    (tampered / "00000007" / "meta.json").write_text(json.dumps(record))
    with pytest.raises(CorruptCheckpoint, match="fails its checksum"):
        load_checkpoint(tampered, 7, state)
