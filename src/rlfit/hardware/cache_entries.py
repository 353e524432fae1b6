"""A damaged entry of a cache on disk is a miss for that entry only: removed, said once, written again.

A process killed while writing (kill -9, a full disk, a power cut) or a disk's error can leave an entry of JAX's
persistent compile cache or of rlfit's program store cut short or garbled. JAX warns once per such entry and leaves
it in place (`LRUCache.put` skips a key whose file exists), so every later process would meet it again; a garbled
executable that still decompresses would reach XLA, which may run its machine code. So every entry is checked when
it is read: rlfit's program store checks its own digest (`rlfit.hardware.program_store`), and JAX's cache is read
through `CheckedCache`, which decompresses each entry as it reads it (zlib's stream carries an Adler-32 checksum,
so a garbled zlib entry fails here; zstd frames, which JAX writes when the `zstandard` package is installed, carry
none, so there a garble that still decompresses is caught only where XLA rejects the executable, see
`forget_unreadable`). A bad entry is removed and named in one note; the program is compiled (or traced) again and
its entry rewritten; the rest of the cache keeps working.

Cost: nothing measurable. JAX decompresses the entry right after reading it; `decompress_executable` hands it the
copy decompressed for the check instead of decompressing it again (once would cost 38 ms for CartpoleBalance smoke's
0.95 MB training step on 2 cores). No scan of the folder.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

from jax._src import compilation_cache as jax_cache  # JAX's cache has no public backend API: pinned JAX, tested
from jax._src.compilation_cache_interface import CacheInterface

CACHE_SUFFIX = "-cache"
"""JAX's file name for an entry of its compile cache: `<program>-<key>-cache` (`jax._src.lru_cache`)."""
_SIDE_SUFFIXES = ("-atime",)
"""Files JAX keeps beside an entry (its last access, when the cache has a size limit)."""
_CHECKED = threading.local()
"""Per thread, the entry `CheckedCache.get` returned last (`compressed`) and its decompressed bytes (`plain`)."""


def remove_damaged(entry: Path, problem: str, redone: str) -> None:
    """Removes the damaged cache entry `entry` and says so in one note on stderr: its path, what is wrong
    (`problem`) and what happens instead (`redone`, e.g. "the program is compiled again"). An entry that cannot be
    removed (a read-only folder) is named too; the program is then redone in every process until it is removed."""
    try:
        entry.unlink(missing_ok=True)
        done = "removed it"
    except OSError as error:
        done = f"could not remove it ({error.strerror or error}; delete it by hand)"
    print(f"rlfit: note: damaged cache entry {entry} ({problem}); {done}, {redone}", file=sys.stderr, flush=True)


def describe(error: BaseException) -> str:
    """An exception as one short line: its type and its message's first line."""
    message = str(error).strip().splitlines()
    return f"{type(error).__name__}: {message[0]}" if message else type(error).__name__


class CheckedCache(CacheInterface):
    """JAX's compile cache backend (`jax._src.compilation_cache_interface.CacheInterface`) with each entry checked
    as it is read: an entry that cannot be read or decompressed is removed and reported, and JAX sees a miss (it
    compiles the program and writes the entry again). Writing is JAX's own."""

    def __init__(self, base: Any) -> None:
        self._base = base
        self._last_read = threading.local()

    @property
    def _path(self) -> Any:
        return self._base._path

    @_path.setter
    def _path(self, value: Any) -> None:
        self._base._path = value

    def entry(self, key: str) -> Path:
        """The file of `key`'s entry."""
        return Path(str(self._base._path)) / f"{key}{CACHE_SUFFIX}"

    def get(self, key: str) -> bytes | None:
        """`key`'s entry, or None when there is none or it is damaged (then it is removed)."""
        self._last_read.key = None
        _CHECKED.compressed = _CHECKED.plain = None
        try:
            value = self._base.get(key)
            if value is not None:
                _CHECKED.plain = _decompress(value)
                _CHECKED.compressed = value
        except Exception as error:  # noqa: BLE001 - any unreadable entry is a miss for this program only
            self.discard(key, describe(error))
            return None
        self._last_read.key = key if value is not None else None
        return value

    def put(self, key: str, value: bytes) -> None:
        self._base.put(key, value)

    def discard(self, key: str, problem: str) -> None:
        """Removes `key`'s entry (and the files JAX keeps beside it) and says so."""
        for suffix in _SIDE_SUFFIXES:
            try:
                (Path(str(self._base._path)) / f"{key}{suffix}").unlink(missing_ok=True)
            except OSError:
                pass
        remove_damaged(self.entry(key), problem, "so its program is compiled again and rewritten")

    def forget_last_read(self, problem: str) -> bool:
        """Removes the entry this thread read last, which XLA has just refused (`problem`): JAX read it (its
        warning "Error reading persistent compilation cache entry" comes in the reading thread, right after the
        read) and now compiles the program. False when this thread read none."""
        key = getattr(self._last_read, "key", None)
        self._last_read.key = None
        if key is None:
            return False
        self.discard(key, problem)
        return True


def check_compile_cache_entries() -> CheckedCache | None:
    """Makes JAX read its persistent compile cache through `CheckedCache`, now and whenever it sets the cache up
    again (after `reset_cache`), and decompress each entry once (`decompress_executable`). Returns the backend in
    use, None while JAX has not set it up (it does at the first compile)."""
    make = jax_cache.get_file_cache
    if not getattr(make, "rlfit_checked", False):
        def get_file_cache(path: str) -> tuple[CacheInterface, str] | None:
            made = make(path)
            return None if made is None else (CheckedCache(made[0]), made[1])

        get_file_cache.rlfit_checked = True  # type: ignore[attr-defined]
        jax_cache.get_file_cache = get_file_cache
    if jax_cache.decompress_executable is not decompress_executable:
        jax_cache.decompress_executable = decompress_executable
    with jax_cache._cache_initialized_mutex:
        if jax_cache._cache is not None and not isinstance(jax_cache._cache, CheckedCache):
            jax_cache._cache = CheckedCache(jax_cache._cache)
        return jax_cache._cache if isinstance(jax_cache._cache, CheckedCache) else None


_decompress = jax_cache.decompress_executable
"""JAX's own decompression of a cache entry (zstd where the `zstandard` package is installed, else zlib)."""


def decompress_executable(executable: bytes) -> bytes:
    """JAX's `decompress_executable`, which returns the bytes `CheckedCache.get` decompressed for the entry it has
    just returned in this thread, instead of decompressing them a second time."""
    if getattr(_CHECKED, "compressed", None) is executable:
        plain = _CHECKED.plain
        _CHECKED.compressed = _CHECKED.plain = None
        return plain
    return _decompress(executable)


def checked_cache_in_use() -> CheckedCache | None:
    """JAX's compile cache backend, where it is a `CheckedCache`."""
    return jax_cache._cache if isinstance(jax_cache._cache, CheckedCache) else None
