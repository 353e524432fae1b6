"""Traced programs kept on disk, so that a second process neither traces nor lowers them again.

JAX's persistent compile cache skips XLA's compile, but its key is the lowered program: every process still traces
the Python code and lowers it to StableHLO before it can look the program up. For a MuJoCo training step that is
most of a warm start (CartpoleBalance quick: 4-6 s of the training step's 6 s with a warm cache, on 2 cores).
This store keeps each program as JAX exported it (`jax.export`: its StableHLO, input and output shapes) beside
the compile cache. A process that finds an entry calls the stored program instead of tracing the code; XLA's
compile of it is then a compile-cache hit as before. The first process compiles the stored program too, so both
processes run the very same program (the training's results do not depend on whether the entry existed).

An entry's name is a digest of everything the traced program depends on: the caller's key (rlfit's config
without the seed, and the plan), the arguments' shapes, dtypes and placements, the versions and installed files
of rlfit, JAX, MuJoCo (MJX) and Playground, JAX's numeric settings, and the devices. Code outside those packages
(an environment built by a user's own factory, `module:function`) is not in the digest, so its programs are not
stored (the caller passes no key). Each entry begins with a SHA-256 digest of the rest, checked when it is read
(a few ms for a training step's entry): an entry cut short or garbled (a kill -9 or a full disk while writing, a
disk's error), or one that cannot be read, is removed and named in one note, and its program is traced again and
rewritten (`rlfit.hardware.cache_entries`); so is one that reads whole but that JAX cannot load
(`rlfit.hardware.jax_setup.lower_ahead`). One that cannot be written is left out (the run goes on).
`RLFIT_PROGRAM_STORE=0` turns the store off; deleting the folder is always safe.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import pickle
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from rlfit.hardware.cache_entries import describe, remove_damaged
from rlfit.hardware.compile_log import STORE_DISCARDED, STORE_HIT

STORE_SWITCH = "RLFIT_PROGRAM_STORE"
"""Environment variable: "0" (or "off", "false") turns the store off."""
PACKAGES = ("jax", "jaxlib", "mujoco", "mujoco-mjx", "playground", "flax", "optax", "numpy", "ml-collections", "gymnax",
            "xminigrid")
"""Distributions whose versions are in every entry's digest."""
WATCHED_MODULES = ("rlfit", "mujoco.mjx", "mujoco_playground")
"""Packages whose installed files (names, sizes, modification times) are in every entry's digest: an edited
checkout of any of them gives new entries."""
FORMAT = 2
"""The entries' layout, in every entry's digest: 2 is a SHA-256 digest of the pickled record, then the record."""
CHECKSUM_BYTES = hashlib.sha256().digest_size
TRACED_AGAIN = "so its program is traced again and rewritten"


class StoredProgram(NamedTuple):
    """A program as JAX exported it, for flat arguments, and how to rebuild its pytrees."""

    exported: Any
    """`jax.export.Exported` of the program taking and returning the flattened leaves."""
    in_tree: Any
    """The arguments' tree structure (a tuple of the positional arguments)."""
    out_tree: Any
    """The result's tree structure."""
    name: str
    """The traced function's name, which `jax.jit` gives the compiled program (and its compile-cache entry)."""
    entry: Path | None = None
    """The store's file it was read from; None when it was traced in this process."""

    def function(self) -> Callable[..., Any]:
        """The stored program as a function of the original (pytree) arguments, for `jax.jit`, named as the
        traced function was."""
        def call(*args: Any) -> Any:
            return self.out_tree.unflatten(self.exported.call(*jax.tree.leaves(args)))

        call.__name__ = call.__qualname__ = self.name
        return call


def store_dir() -> Path | None:
    """The store's folder, beside JAX's compile cache (`rlfit.hardware.jax_setup.configure_jax`); None when the
    store is switched off or there is no compile cache (then nothing is kept between processes at all)."""
    if os.environ.get(STORE_SWITCH, "1").strip().lower() in ("0", "off", "false", "no"):
        return None
    if not jax.config.jax_enable_compilation_cache or not jax.config.jax_compilation_cache_dir:
        return None
    return Path(jax.config.jax_compilation_cache_dir).parent / "programs"


def traced(fn: Callable[..., Any], args: Sequence[Any], key: str, directory: Path) -> StoredProgram | None:
    """`fn` for `args` (arrays, scalars or ShapeDtypeStructs) from the store when its entry exists, else traced
    and exported now (and written to the store for the next process); None when the arguments' structure cannot
    be stored (then the caller traces `fn` itself)."""
    leaves, in_tree = jax.tree.flatten(tuple(args))
    try:
        tree_bytes = pickle.dumps(in_tree, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return None
    entry = directory / f"{entry_digest(key, leaves, tree_bytes)}.jaxprog"
    stored = _read(entry)
    if stored is not None:
        jax.monitoring.record_event(STORE_HIT)
        return stored
    try:
        stored = _export(fn, leaves, in_tree)
    except Exception:  # noqa: BLE001 - a program jax.export cannot hold (or a bug in `fn`): the caller traces it
        return None    # itself, and a real error is raised there as it would be without the store
    written = _keep(entry, {"format": FORMAT, "exported": bytes(stored.exported.serialize()),
                            "in_tree": stored.in_tree, "out_tree": stored.out_tree, "name": stored.name})
    return _program_of(written) if written is not None else stored


def _export(fn: Callable[..., Any], leaves: list[Any], in_tree: Any) -> StoredProgram:
    """Traces `fn` once for `leaves`' shapes and exports it as a program of the flat leaves."""
    out_tree: list[Any] = []

    def flat(*flat_args: Any) -> list[Any]:
        result, tree = jax.tree.flatten(fn(*in_tree.unflatten(flat_args)))
        out_tree.append(tree)
        return result

    flat.__name__ = flat.__qualname__ = getattr(fn, "__name__", "program")  # JAX's compile log names it as `fn`
    exported = jax.export.export(jax.jit(flat))(*[_abstract(leaf) for leaf in leaves])
    return StoredProgram(exported, in_tree, out_tree[0], getattr(fn, "__name__", "program"))


def _abstract(leaf: Any) -> jax.ShapeDtypeStruct:
    """A leaf's shape, dtype and (for a ShapeDtypeStruct or an array) placement."""
    if isinstance(leaf, jax.ShapeDtypeStruct):
        return leaf
    sharding = getattr(leaf, "sharding", None) if isinstance(leaf, jax.Array) else None
    return jax.ShapeDtypeStruct(np.shape(leaf), jax.dtypes.result_type(leaf), sharding=sharding)


def entry_digest(key: str, leaves: list[Any], tree_bytes: bytes) -> str:
    """The entry's name: a digest of the caller's key, the arguments (their leaves' shapes, dtypes and placements;
    `tree_bytes`, their structure pickled, which holds the static data of MJX's and Flax's nodes by value where
    the structure's text would print object addresses) and what the traced code depends on."""
    arguments = [(tuple(a.shape), str(a.dtype), str(a.sharding)) for a in map(_abstract, leaves)]
    tree = hashlib.sha256(tree_bytes).hexdigest()
    parts = {"format": FORMAT, "key": key, "arguments": arguments, "tree": tree, "code": code_fingerprint(),
             "settings": _jax_settings(), "devices": [(d.platform, d.device_kind) for d in jax.devices()]}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:40]


def _jax_settings() -> dict[str, Any]:
    """JAX's settings that change what tracing produces."""
    names = ("jax_default_matmul_precision", "jax_enable_x64", "jax_default_prng_impl", "jax_threefry_partitionable",
             "jax_numpy_rank_promotion", "jax_numpy_dtype_promotion")
    return {name: str(getattr(jax.config, name, None)) for name in names}


@functools.cache
def code_fingerprint() -> str:
    """The versions of `PACKAGES` and a digest of the installed files of `WATCHED_MODULES` (path, size and
    modification time of each: reading them all would cost more than it saves)."""
    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    digest = hashlib.sha256(json.dumps(versions, sort_keys=True).encode())
    digest.update(sys.version.encode())
    for module in WATCHED_MODULES:
        for path in _package_files(module):
            stat = path.stat()
            digest.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _package_files(module: str) -> list[Path]:
    """The files of the installed package `module` (none when it is not installed), sorted."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    files: list[Path] = []
    for location in spec.submodule_search_locations:
        for root, folders, names in os.walk(location):
            folders[:] = sorted(folder for folder in folders if folder != "__pycache__")
            files.extend(Path(root) / name for name in sorted(names) if not name.endswith(".pyc"))
    return files


def _read(entry: Path) -> StoredProgram | None:
    """The stored program, or None when there is none or it is damaged (then it is removed and named)."""
    record = read_record(entry)
    if record is None:
        return None
    try:
        return _program_of(record, entry)
    except Exception as error:  # noqa: BLE001 - a record jax.export cannot read: traced again and rewritten
        remove_damaged(entry, describe(error), TRACED_AGAIN)
        return None


def read_record(entry: Path) -> Any:
    """The record `entry` holds, or None when there is none, or when it is damaged: it cannot be read, is cut short
    or garbled (its digest does not match), or does not unpickle. A damaged entry is removed and named in one
    note."""
    try:
        data = entry.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        remove_damaged(entry, f"cannot be read: {error.strerror or error}", TRACED_AGAIN)
        return None
    checksum, payload = data[:CHECKSUM_BYTES], data[CHECKSUM_BYTES:]
    if hashlib.sha256(payload).digest() != checksum:
        remove_damaged(entry, f"cut short or garbled: its {len(data)} bytes do not match their checksum",
                       TRACED_AGAIN)
        return None
    try:
        record = pickle.loads(payload)
    except Exception as error:  # noqa: BLE001 - written whole but unreadable here (another Python's pickle)
        remove_damaged(entry, describe(error), TRACED_AGAIN)
        return None
    return record


def _program_of(record: dict[str, Any], entry: Path | None = None) -> StoredProgram:
    """The program a `.jaxprog` record holds (read from `entry`)."""
    return StoredProgram(jax.export.deserialize(bytearray(record["exported"])), record["in_tree"], record["out_tree"],
                         record["name"], entry)


def _keep(entry: Path, record: dict[str, Any]) -> dict[str, Any] | None:
    """Writes `record` to `entry` (whole or not at all) and returns it as a later process will read it: unpickled
    from the bytes written. The process that traced uses that copy too, because a pytree structure unpickled equals
    the traced one but may pickle to other bytes (objects its nodes shared become copies), and programs compiled
    for a result's shapes are stored under a digest of their arguments' pickled structure: that digest must not
    depend on which process traced. None when the record cannot be pickled (nothing is written)."""
    try:
        data = pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - a structure that cannot be pickled is not stored
        return None
    _write_bytes(entry, hashlib.sha256(data).digest() + data)
    return pickle.loads(data)


def discard(program: StoredProgram, error: BaseException) -> None:
    """Removes the entry `program` was read from, which JAX could not load (`error`), and names it; the program
    then counts as not from the store (`STORE_DISCARDED`)."""
    if program.entry is not None:
        remove_damaged(program.entry, describe(error), TRACED_AGAIN)
    jax.monitoring.record_event(STORE_DISCARDED)


def _write_bytes(entry: Path, data: bytes) -> None:
    """Writes `data` whole or not at all (a temporary file renamed into place); a failure (a full disk, a
    read-only folder) leaves the store as it was."""
    temporary: Path | None = None
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=entry.parent, prefix=entry.name, suffix=".tmp", delete=False) as file:
            temporary = Path(file.name)
            file.write(data)
        os.replace(temporary, entry)
    except Exception:  # noqa: BLE001 - an entry not written only costs the next process a trace
        if temporary is not None:
            temporary.unlink(missing_ok=True)


def result_shapes(fn: Callable[..., Any], args: Sequence[Any], key: str | None,
                  directory: Path | None = None) -> Any:
    """`jax.eval_shape(fn, *args)` (a pytree of ShapeDtypeStructs), kept in the store under `key` (what `fn`
    depends on besides its arguments and the installed packages, as for `traced`): a later process reads the
    shapes in milliseconds instead of tracing `fn` (a training state's `init`: most of a second for a MuJoCo
    environment). With no key or no store (`directory`, default `store_dir()`), just `jax.eval_shape`. The process
    that traces returns the shapes as a later process reads them (`_keep`)."""
    directory = directory if directory is not None else (store_dir() if key is not None else None)
    if key is None or directory is None:
        return jax.eval_shape(fn, *args)
    leaves, in_tree = jax.tree.flatten(tuple(args))
    try:
        tree_bytes = pickle.dumps(in_tree, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return jax.eval_shape(fn, *args)
    entry = directory / f"{entry_digest(key + ' (shapes)', leaves, tree_bytes)}.shapes"
    record = read_record(entry)
    if record is not None:
        try:
            return _shapes_of(record)
        except Exception as error:  # noqa: BLE001 - whole but not a shapes record: traced and rewritten below
            remove_damaged(entry, describe(error), TRACED_AGAIN)
    shapes = jax.eval_shape(fn, *args)
    out_leaves, out_tree = jax.tree.flatten(shapes)
    if not all(isinstance(leaf.dtype, np.dtype) for leaf in out_leaves):  # JAX's key types: not kept
        return shapes
    written = _keep(entry, {"format": FORMAT, "out_tree": out_tree, "leaves": [
        (tuple(leaf.shape), leaf.dtype.str, bool(leaf.weak_type)) for leaf in out_leaves]})
    return _shapes_of(written) if written is not None else shapes


def kept_value(key: str, make: Callable[[], Any], directory: Path | None = None) -> Any:
    """`make()`, a small picklable value computed by the packages whose code is in every entry's digest (an
    environment's observation set, derived by tracing its reset), kept in the store under `key` (what it depends on
    besides those packages): a later process reads it in milliseconds instead of computing it. With no store
    (`directory`, default `store_dir()`), just `make()`; an exception from `make` is raised and nothing is kept."""
    directory = directory if directory is not None else store_dir()
    if directory is None:
        return make()
    entry = directory / f"{entry_digest(key + ' (value)', [], b'')}.value"
    record = read_record(entry)
    if isinstance(record, dict) and "value" in record:
        return record["value"]
    value = make()
    _keep(entry, {"format": FORMAT, "value": value})
    return value


def _shapes_of(record: dict[str, Any]) -> Any:
    """The pytree of ShapeDtypeStructs a `.shapes` record holds."""
    return record["out_tree"].unflatten([jax.ShapeDtypeStruct(tuple(shape), np.dtype(dtype), weak_type=weak)
                                         for shape, dtype, weak in record["leaves"]])
