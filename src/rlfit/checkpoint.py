"""Full-state checkpoints: params, optimizer, normalizer, RNG, environment state and host counters.

Layout, one directory per saved iteration:

    checkpoints/00000050/
        state/      the TrainState's leaves in tree order, written by Orbax
        meta.json   counters, checksum of every leaf, config, plan, package versions

A checkpoint is written under a temporary name and renamed into place only when complete, so a kill at any
instant leaves either the previous set of checkpoints or the new one, never one that looks valid but is
not. On load the checksum is verified; a corrupt newest checkpoint is reported and the previous one used.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import jax
import numpy as np

from rlfit.atomic_files import swap_into_place, write_synced
from rlfit.distributed import host_copy

STATE_DIR = "state"
META_FILE = "meta.json"
FORMAT_VERSION = 1


class CorruptCheckpoint(Exception):
    """A checkpoint that is missing parts or whose contents do not match its checksum."""


class CheckpointMismatch(CorruptCheckpoint):
    """An intact checkpoint whose arrays do not fit the state the run's config builds."""


@dataclass(frozen=True)
class CheckpointMeta:
    """What meta.json holds besides the arrays."""

    iteration: int
    env_steps: int
    progress: dict[str, Any]
    checksum: str
    config: dict[str, Any]
    plan: dict[str, Any]
    versions: dict[str, str]
    format_version: int = FORMAT_VERSION
    trimmed: dict[str, Any] = field(default_factory=dict)
    """Leaf index -> {'rows': full leading size, 'fill': the value of every row left out}: leaves saved only up
    to their filled rows (an unfilled replay buffer); restored exactly by padding with `fill`."""


def step_dir(directory: Path, iteration: int) -> Path:
    return directory / f"{iteration:08d}"


def list_steps(directory: Path) -> list[int]:
    """Iterations of the (complete-looking) checkpoints in `directory`, oldest first."""
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.is_dir() and p.name.isdigit())


def leaves_checksum(leaves: list[np.ndarray]) -> str:
    """sha256 over every leaf's dtype, shape and bytes, in order."""
    digest = hashlib.sha256()
    for leaf in leaves:
        digest.update(f"{leaf.dtype.str}{leaf.shape}".encode())
        digest.update(np.ascontiguousarray(leaf).tobytes())
    return digest.hexdigest()


def save_checkpoint(directory: Path, state: Any, meta_fields: dict[str, Any],
                    extra_files: dict[str, bytes] | None = None, stored_rows: list[int | None] | None = None,
                    drop_trimmed: bool = False) -> Path:
    """Writes `state` (any pytree of arrays) atomically as checkpoint `meta_fields['iteration']`.

    `extra_files` (name -> bytes) are written into the checkpoint's folder too (e.g. a copy of the metrics).
    `stored_rows` (per leaf, None for all) saves a leaf's first rows only, where every row after them holds one
    value (an unfilled replay buffer); see `CheckpointMeta.trimmed`. With `drop_trimmed` the rows after them
    are left out whatever they hold (`run.checkpoint_replay: false`) and restored as zeros.

    Raises OSError when the disk refuses (full, read-only); earlier checkpoints are untouched then.
    """
    leaves, trimmed = fetch_leaves(state, stored_rows or [], drop_trimmed)
    meta = CheckpointMeta(checksum=leaves_checksum(leaves), trimmed=trimmed, **meta_fields)
    final = step_dir(directory, meta.iteration)
    tmp = directory / f".tmp-{meta.iteration:08d}-{os.getpid()}"
    directory.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir()
        this_process_only().save((tmp / STATE_DIR).absolute(), {"leaves": _as_mapping(leaves)})
        for name, data in (extra_files or {}).items():
            write_synced(tmp / name, data)
        write_synced(tmp / META_FILE, json.dumps(asdict(meta), indent=1, default=str))
        swap_into_place(tmp, final)  # replaces the same iteration saved before (after a back-off)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def load_checkpoint(directory: Path, iteration: int, like: Any) -> tuple[Any, CheckpointMeta]:
    """Restores checkpoint `iteration` into the structure of `like` (a pytree or its abstract shapes).

    Raises CorruptCheckpoint when it is incomplete, does not fit `like`, or fails its checksum.
    """
    path = step_dir(directory, iteration)
    try:
        meta = CheckpointMeta(**json.loads((path / META_FILE).read_text()))
        restored = this_process_only().restore((path / STATE_DIR).absolute())
    except Exception as error:  # noqa: BLE001 - any failure to read means this checkpoint is unusable
        raise CorruptCheckpoint(f"checkpoint {path} is corrupt or incomplete: it cannot be read "
                                f"({type(error).__name__}: {error})") from None
    stored = (restored.get("leaves") if isinstance(restored, dict) else None) or {}
    treedef = jax.tree.structure(like)
    trimmed = {int(index): info for index, info in meta.trimmed.items()}
    try:
        leaves = [_restored_leaf(stored, index, expected, trimmed.get(index))
                  for index, expected in enumerate(jax.tree.leaves(like))]
    except KeyError:
        raise CheckpointMismatch(f"checkpoint {path} does not match the state this config builds (it holds "
                                 f"{len(stored)} arrays, the run needs more)") from None
    if len(stored) != sum(1 for leaf in leaves if leaf.size):
        raise CheckpointMismatch(f"checkpoint {path} does not match the state this config builds (it holds "
                                 f"{len(stored)} arrays, the run needs fewer)")
    if leaves_checksum(leaves) != meta.checksum:
        raise CorruptCheckpoint(f"checkpoint {path} is corrupt: it fails its checksum")
    leaves = [_padded(leaf, trimmed[index]) if index in trimmed else leaf for index, leaf in enumerate(leaves)]
    for leaf, expected in zip(leaves, jax.tree.leaves(like)):
        if leaf.shape != tuple(expected.shape) or leaf.dtype != expected.dtype:
            raise CheckpointMismatch(f"checkpoint {path} does not match the state this config builds (an array "
                                     f"{leaf.shape} {leaf.dtype} where the run needs {tuple(expected.shape)} "
                                     f"{expected.dtype})")
    return jax.tree.unflatten(treedef, [jax.numpy.asarray(leaf) for leaf in leaves]), meta


def this_process_only() -> Any:
    """Orbax's PyTree checkpointer for host arrays written and read by this process alone: in a run over several
    processes only process 0 writes (`rlfit.distributed`), so Orbax must not wait for the others."""
    import orbax.checkpoint as ocp

    alone = ocp.options.MultiprocessingOptions(primary_host=jax.process_index(), active_processes={jax.process_index()})
    return ocp.Checkpointer(ocp.PyTreeCheckpointHandler(multiprocessing_options=alone), multiprocessing_options=alone)


def read_meta(directory: Path, iteration: int) -> CheckpointMeta | None:
    try:
        return CheckpointMeta(**json.loads((step_dir(directory, iteration) / META_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def prune(directory: Path, keep_last: int) -> list[int]:
    """Deletes all but the newest `keep_last` checkpoints and the best by eval reward; returns the kept ones."""
    steps = list_steps(directory)
    keep = set(steps[-keep_last:])
    rewards = {s: (read_meta(directory, s) or _NO_META).progress.get("eval_reward_at_save") for s in steps}
    scored = [s for s, r in rewards.items() if r is not None]
    if scored:
        keep.add(max(scored, key=lambda s: (rewards[s], s)))
    for iteration in steps:
        if iteration not in keep:
            shutil.rmtree(step_dir(directory, iteration), ignore_errors=True)
    for stale in [*directory.glob(".tmp-*"), *directory.glob(".*.old")]:
        shutil.rmtree(stale, ignore_errors=True)
    return sorted(keep)


_NO_META = CheckpointMeta(0, 0, {}, "", {}, {}, {})


def _as_mapping(leaves: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Leaves by tree index; empty arrays (Orbax refuses them) are left out and rebuilt from their shape."""
    return {f"{index:06d}": leaf for index, leaf in enumerate(leaves) if leaf.size}


def fetch_leaves(state: Any, stored_rows: list[int | None], drop_trimmed: bool = False
                 ) -> tuple[list[np.ndarray], dict[str, Any]]:
    """Host copies of `state`'s leaves, each cut to its stored rows where the rows left out all hold one value
    (or whatever they hold, with `drop_trimmed`), and the record of the cuts (`CheckpointMeta.trimmed`).

    A leaf is cut where it lives (on the device) before it is copied, so the rows left out are never fetched.
    Over several processes this is a collective (`rlfit.distributed.host_copy`): every process calls it.
    """
    leaves, trimmed = [], {}
    for index, leaf in enumerate(jax.tree.leaves(state)):
        rows = stored_rows[index] if index < len(stored_rows) else None
        if rows is not None and np.ndim(leaf) and rows < np.shape(leaf)[0]:
            tail = leaf[rows:]
            if drop_trimmed:
                trimmed[str(index)] = {"rows": int(np.shape(leaf)[0]), "fill": 0, "dropped": True}
                leaf = leaf[:rows]
            elif np.size(tail):
                fill = host_copy(tail.reshape(-1)[0]).item()
                if bool(jax.numpy.all(tail == fill)):
                    trimmed[str(index)] = {"rows": int(np.shape(leaf)[0]), "fill": fill}
                    leaf = leaf[:rows]
        leaves.append(host_copy(leaf))
    return leaves, trimmed


def dropped_leaves(meta: CheckpointMeta) -> bool:
    """True when the checkpoint left rows out whatever they held (saved with `run.checkpoint_replay: false`)."""
    return any(info.get("dropped") for info in meta.trimmed.values())


def _restored_leaf(stored: dict[str, Any], index: int, expected: Any, trim: dict[str, Any] | None) -> np.ndarray:
    shape = tuple(expected.shape) if trim is None else (_stored_rows(stored, index),) + tuple(expected.shape[1:])
    if int(np.prod(shape)) == 0:
        return np.zeros(shape, expected.dtype)
    return np.asarray(stored[f"{index:06d}"])


def _stored_rows(stored: dict[str, Any], index: int) -> int:
    """Leading size of a trimmed leaf as stored (0 when all its rows were left out: Orbax keeps no empty array)."""
    key = f"{index:06d}"
    return int(np.shape(stored[key])[0]) if key in stored else 0


def _padded(leaf: np.ndarray, trim: dict[str, Any]) -> np.ndarray:
    """A trimmed leaf back at its full leading size, the rows left out set to their one value."""
    rest = np.full((trim["rows"] - leaf.shape[0],) + leaf.shape[1:], trim["fill"], leaf.dtype)
    return np.concatenate([leaf, rest])
