"""Full-state checkpoints: params, optimizer, normalizer, RNG, environment state and host counters.

Layout, one directory per saved iteration:

    checkpoints/00000050/
        state/      the TrainState's leaves in tree order, written by Orbax: each process its own shards
        meta.json   counters, every leaf's shape, dtype and checksum, config, plan, package versions

Every process of a run takes part in a save and a load (over several processes they are collectives, and the
checkpoint folder must be on a file system all of them see). Orbax writes each array as the shards that live
on each process's devices, never gathered into one process's memory, and reads each back as the shards the
loading run's layout asks for, so a checkpoint of a run on N devices (or processes) continues on M.

A checkpoint is written under a temporary name and renamed into place only when complete, so a kill at any
instant leaves either the previous set of checkpoints or the new one, never one that looks valid but is
not. On load each leaf's checksum is verified (`rlfit.checkpoints.fingerprint`: computed where the shards live and the
same however an array is split); a corrupt newest checkpoint is reported and the previous one used.
Checkpoints of format 1 (whole arrays written by process 0, a sha256 of their bytes) still load.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import jax
import numpy as np

from rlfit.rundir.atomic import swap_into_place, write_synced
from rlfit.rundir.layout import list_steps
from rlfit.parallel.distributed import barrier, host_copy
from rlfit.checkpoints.fingerprint import fingerprints
from rlfit.rundir.write_failures import quiet_orbax_echoes

STATE_DIR = "state"
META_FILE = "meta.json"
FORMAT_VERSION = 2


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
    """sha256 over `arrays` (format 2); over every leaf's dtype, shape and bytes (format 1)."""
    config: dict[str, Any]
    plan: dict[str, Any]
    versions: dict[str, str]
    format_version: int = FORMAT_VERSION
    trimmed: dict[str, Any] = field(default_factory=dict)
    """Leaf index -> {'rows': full leading size, 'stored': rows saved, 'fill': the value of every row left out}:
    leaves saved only up to their filled rows (an unfilled replay buffer); restored exactly by padding with
    `fill` ('dropped': left out whatever they held, `run.checkpoint_replay: false`, restored as zeros)."""
    arrays: list[dict[str, Any]] = field(default_factory=list)
    """Per leaf in tree order (format 2): {'shape', 'dtype', 'checksum'}, the checksum over its stored rows."""


def step_dir(directory: Path, iteration: int) -> Path:
    return directory / f"{iteration:08d}"


def save_checkpoint(directory: Path, state: Any, meta_fields: dict[str, Any],
                    extra_files: dict[str, bytes] | None = None, stored_rows: list[int | None] | None = None,
                    drop_trimmed: bool = False, writer: bool = True,
                    write_more: Callable[[Path], None] | None = None) -> Path:
    """Writes `state` (any pytree of arrays) atomically as checkpoint `meta_fields['iteration']`.

    Every process calls it; each writes its arrays' shards, and the `writer` (process 0) alone the rest.
    `extra_files` (name -> bytes) are written into the checkpoint's folder too (e.g. a copy of the metrics), and
    `write_more(folder)` may add more (the policy) before the folder is renamed into place (the writer only).
    `stored_rows` (per leaf, None for all) saves a leaf's first rows only, where every row after them holds one
    value (an unfilled replay buffer); see `CheckpointMeta.trimmed`. With `drop_trimmed` the rows after them
    are left out whatever they hold (`run.checkpoint_replay: false`) and restored as zeros.

    Raises OSError when the disk refuses (full, over quota, read-only), also where Orbax reports it as another
    error; earlier checkpoints are untouched then.
    """
    leaves = [leaf if isinstance(leaf, jax.Array) else jax.numpy.asarray(leaf) for leaf in jax.tree.leaves(state)]
    rows, trimmed = stored_extent(leaves, stored_rows or [], drop_trimmed)
    sums = fingerprints(leaves, rows)
    arrays = [{"shape": list(leaf.shape), "dtype": leaf.dtype.name, "checksum": digest}
              for leaf, digest in zip(leaves, sums)]
    meta = CheckpointMeta(checksum=_arrays_checksum(arrays), trimmed=trimmed, arrays=arrays, **meta_fields)
    stored = [leaf[:rows[index]] if str(index) in trimmed else leaf for index, leaf in enumerate(leaves)]
    final = step_dir(directory, meta.iteration)
    tmp = directory / f".tmp-{meta.iteration:08d}"  # one name for every process
    try:
        if writer:
            directory.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
        barrier(f"rlfit-checkpoint-{meta.iteration}-folder")
        with quiet_orbax_echoes():  # a refused write leaves as the OSError behind it, without Orbax's echoes
            _orbax().save((tmp / STATE_DIR).absolute(), {"leaves": _as_mapping(stored)})
        if writer:
            for name, data in (extra_files or {}).items():
                write_synced(tmp / name, data)
            if write_more is not None:
                write_more(tmp)
            write_synced(tmp / META_FILE, json.dumps(asdict(meta), indent=1, default=str))
            swap_into_place(tmp, final)  # replaces the same iteration saved before (after a back-off)
    except BaseException:
        if writer:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def stored_extent(leaves: list[jax.Array], stored_rows: list[int | None], drop_trimmed: bool = False
                  ) -> tuple[list[int], dict[str, Any]]:
    """Per leaf the rows to save (its full leading size, or fewer where every row after them holds one value, or
    whatever they hold with `drop_trimmed`) and the record of the cuts (`CheckpointMeta.trimmed`).

    The test of the rows left out runs where the leaf lives; over several processes every process calls it.
    """
    rows, trimmed = [], {}
    for index, leaf in enumerate(leaves):
        full = int(leaf.shape[0]) if leaf.ndim else 1
        keep = stored_rows[index] if index < len(stored_rows) else None
        if keep is not None and leaf.ndim and keep < full:
            tail = leaf[keep:]
            if drop_trimmed:
                trimmed[str(index)] = {"rows": full, "stored": keep, "fill": 0, "dropped": True}
                full = keep
            elif tail.size:
                fill = host_copy(tail.reshape(-1)[0]).item()
                if bool(host_copy(jax.numpy.all(tail == fill))):
                    trimmed[str(index)] = {"rows": full, "stored": keep, "fill": fill}
                    full = keep
        rows.append(full)
    return rows, trimmed


def load_checkpoint(directory: Path, iteration: int, like: Any) -> tuple[Any, CheckpointMeta]:
    """Restores checkpoint `iteration` into the structure of `like` (a pytree or its abstract shapes), each leaf
    laid out as `like`'s sharding says (on the default device where it names none). Every process calls it.

    Raises CorruptCheckpoint when it is incomplete, does not fit `like`, or fails its checksum.
    """
    path = step_dir(directory, iteration)
    try:
        meta = CheckpointMeta(**json.loads((path / META_FILE).read_text()))
    except Exception as error:  # noqa: BLE001 - any failure to read means this checkpoint is unusable
        raise CorruptCheckpoint(f"checkpoint {path} is corrupt or incomplete: its {META_FILE} cannot be read "
                                f"({type(error).__name__}: {error})") from None
    if meta.format_version == 1:
        return _load_format_1(path, meta, like)
    if _arrays_checksum(meta.arrays) != meta.checksum:
        raise CorruptCheckpoint(f"checkpoint {path} is corrupt: its {META_FILE} fails its checksum")
    expected = jax.tree.leaves(like)
    _check_fits(path, meta, expected)
    trimmed = {int(index): info for index, info in meta.trimmed.items()}
    rows = [trimmed[i]["stored"] if i in trimmed else (int(leaf.shape[0]) if len(leaf.shape) else 1)
            for i, leaf in enumerate(expected)]
    shapes = [(rows[i],) + tuple(leaf.shape[1:]) if i in trimmed else tuple(leaf.shape)
              for i, leaf in enumerate(expected)]
    shardings = [_sharding_of(leaf) for leaf in expected]
    try:
        stored = _restore(path / STATE_DIR, expected, shapes, shardings)
    except Exception as error:  # noqa: BLE001 - any failure to read means this checkpoint is unusable
        raise CorruptCheckpoint(f"checkpoint {path} is corrupt or incomplete: it cannot be read "
                                f"({type(error).__name__}: {str(error).splitlines()[0][:200]})") from None
    leaves = [_completed(stored.get(i), expected[i], shapes[i], shardings[i], trimmed.get(i))
              for i in range(len(expected))]
    for index, (digest, record) in enumerate(zip(fingerprints(leaves, rows), meta.arrays)):
        if digest != record["checksum"]:
            raise CorruptCheckpoint(f"checkpoint {path} is corrupt: array {index} {tuple(record['shape'])} fails "
                                    "its checksum")
    return jax.tree.unflatten(jax.tree.structure(like), leaves), meta


def _check_fits(path: Path, meta: CheckpointMeta, expected: list[Any]) -> None:
    """Raises CheckpointMismatch unless the checkpoint's arrays have the count, shapes and dtypes of `expected`."""
    if len(meta.arrays) != len(expected):
        need = "more" if len(expected) > len(meta.arrays) else "fewer"
        raise _mismatch(path, f"it holds {len(meta.arrays)} arrays, the run needs {need}")
    for record, leaf in zip(meta.arrays, expected):
        have, want = (tuple(record["shape"]), record["dtype"]), (tuple(leaf.shape), np.dtype(leaf.dtype).name)
        if have != want:
            raise _mismatch(path, f"an array {have[0]} {have[1]} where the run needs {want[0]} {want[1]}")


def _mismatch(path: Path, detail: str) -> CheckpointMismatch:
    """The one-line error for an intact checkpoint whose arrays do not fit the run's state (`detail` says how)."""
    return CheckpointMismatch(f"checkpoint {path} does not match the state this config builds ({detail})")


def _sharding_of(leaf: Any) -> Any:
    """Where a restored leaf goes: `like`'s sharding for it, else this process's first device."""
    sharding = getattr(leaf, "sharding", None)
    return sharding if sharding is not None else jax.sharding.SingleDeviceSharding(jax.local_devices()[0])


def _restore(path: Path, expected: list[Any], shapes: list[tuple[int, ...]], shardings: list[Any]) -> dict[int, Any]:
    """The stored (non-empty) leaves by index, read by Orbax straight into their shards."""
    import orbax.checkpoint as ocp

    present = [i for i, shape in enumerate(shapes) if int(np.prod(shape))]
    item, args = {}, {}
    for i in present:
        key, dtype = f"{i:06d}", np.dtype(expected[i].dtype)
        item[key] = jax.ShapeDtypeStruct(shapes[i], dtype)
        args[key] = ocp.ArrayRestoreArgs(sharding=_fitting(shardings[i], shapes[i]), global_shape=shapes[i],
                                         dtype=dtype)
    restored = _orbax().restore(path.absolute(), args=ocp.args.PyTreeRestore(item={"leaves": item},
                                                                              restore_args={"leaves": args}))
    return {i: restored["leaves"][f"{i:06d}"] for i in present}


def _fitting(sharding: Any, shape: tuple[int, ...]) -> Any:
    """`sharding` where it splits `shape` evenly (a leaf's stored rows may not), else the same devices whole."""
    try:
        sharding.shard_shape(shape)
        return sharding
    except ValueError:
        return jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec())


def _completed(stored: Any, expected: Any, shape: tuple[int, ...], sharding: Any, trim: dict[str, Any] | None) -> Any:
    """A leaf at its full shape and sharding: the stored rows, then (trimmed) the rest filled with their value;
    a leaf without stored values (empty, or every row left out) built from its shape."""
    full, dtype = tuple(expected.shape), np.dtype(expected.dtype)
    fill = trim["fill"] if trim is not None else 0

    def build(*rows: Any) -> Any:
        rest = jax.numpy.full((full[0] - shape[0],) + full[1:], fill, dtype) if trim is not None else None
        if not rows:
            return jax.numpy.full(full, fill, dtype)
        return rows[0] if rest is None else jax.numpy.concatenate([rows[0], rest])

    if stored is not None and trim is None:
        return stored
    return jax.jit(build, out_shardings=sharding)(*([] if stored is None else [stored]))


def _arrays_checksum(arrays: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(arrays, sort_keys=True).encode()).hexdigest()


def _orbax() -> Any:
    """Orbax's PyTree checkpointer over every process of the run (process 0 finalizes each save)."""
    import orbax.checkpoint as ocp

    return ocp.Checkpointer(ocp.PyTreeCheckpointHandler())


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


def _as_mapping(leaves: list[Any]) -> dict[str, Any]:
    """Leaves by tree index; empty arrays (Orbax refuses them) are left out and rebuilt from their shape."""
    return {f"{index:06d}": leaf for index, leaf in enumerate(leaves) if leaf.size}


def dropped_leaves(meta: CheckpointMeta) -> bool:
    """True when the checkpoint left rows out whatever they held (saved with `run.checkpoint_replay: false`)."""
    return any(info.get("dropped") for info in meta.trimmed.values())


def _load_format_1(path: Path, meta: CheckpointMeta, like: Any) -> tuple[Any, CheckpointMeta]:
    """A checkpoint of format 1: whole arrays, written and read by one process, a sha256 of their bytes."""
    import orbax.checkpoint as ocp

    alone = ocp.options.MultiprocessingOptions(primary_host=jax.process_index(), active_processes={jax.process_index()})
    try:
        restored = ocp.Checkpointer(ocp.PyTreeCheckpointHandler(multiprocessing_options=alone),
                                    multiprocessing_options=alone).restore((path / STATE_DIR).absolute())
    except Exception as error:  # noqa: BLE001 - any failure to read means this checkpoint is unusable
        raise CorruptCheckpoint(f"checkpoint {path} is corrupt or incomplete: it cannot be read "
                                f"({type(error).__name__}: {error})") from None
    stored = (restored.get("leaves") if isinstance(restored, dict) else None) or {}
    trimmed = {int(index): info for index, info in meta.trimmed.items()}
    try:
        leaves = [_format_1_leaf(stored, index, expected, trimmed.get(index))
                  for index, expected in enumerate(jax.tree.leaves(like))]
    except KeyError:
        raise _mismatch(path, f"it holds {len(stored)} arrays, the run needs more") from None
    if len(stored) != sum(1 for leaf in leaves if leaf.size):
        raise _mismatch(path, f"it holds {len(stored)} arrays, the run needs fewer")
    digest = hashlib.sha256()
    for leaf in leaves:
        digest.update(f"{leaf.dtype.str}{leaf.shape}".encode())
        digest.update(np.ascontiguousarray(leaf).tobytes())
    if digest.hexdigest() != meta.checksum:
        raise CorruptCheckpoint(f"checkpoint {path} is corrupt: it fails its checksum")
    for index, info in trimmed.items():
        rest = np.full((info["rows"] - leaves[index].shape[0],) + leaves[index].shape[1:], info["fill"],
                       leaves[index].dtype)
        leaves[index] = np.concatenate([leaves[index], rest])
    for leaf, expected in zip(leaves, jax.tree.leaves(like)):
        if leaf.shape != tuple(expected.shape) or leaf.dtype != expected.dtype:
            raise _mismatch(path, f"an array {leaf.shape} {leaf.dtype} where the run needs {tuple(expected.shape)} "
                                  f"{expected.dtype}")
    return jax.tree.unflatten(jax.tree.structure(like), [jax.numpy.asarray(leaf) for leaf in leaves]), meta


def _format_1_leaf(stored: dict[str, Any], index: int, expected: Any, trim: dict[str, Any] | None) -> np.ndarray:
    key = f"{index:06d}"
    if trim is None:
        shape = tuple(expected.shape)
    else:  # 0 rows when all were left out (Orbax keeps no empty array)
        shape = (int(np.shape(stored[key])[0]) if key in stored else 0,) + tuple(expected.shape[1:])
    if int(np.prod(shape)) == 0:
        return np.zeros(shape, expected.dtype)
    return np.asarray(stored[key])
