"""Process-wide JAX settings rlfit relies on: explicit matmul precision, a persistent compile cache, and the XLA
options every ahead-of-time compile uses."""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

MATMUL_PRECISION = {"fp32": "highest", "bf16": "default", "fp16": "default"}

CPU_COMPILER_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": ""}
"""XLA's CPU backend hands matrix products and convolutions to YNNPACK fusions by default. rlfit turns them off
(`benchmarks/cpu_compile_options.py`) for programs with convolutions (camera frames: the simple2dcnn encoder's
forward+backward ran 1.4x faster without) and for SAC's training step (its many small gradient updates: the
quick preset's iteration ran faster without). Other programs keep XLA's defaults: PPO's iteration gained
nothing, and under a capped address space compiling it this way aborted instead of reporting
RESOURCE_EXHAUSTED (tests/run/test_oom_backoff.py)."""


@functools.cache
def _cpu_options_known() -> bool:
    """Whether this XLA takes `CPU_COMPILER_OPTIONS` (an XLA without them compiles with its defaults)."""
    try:
        jax.jit(lambda x: x + 1).lower(1.0).compile(compiler_options=CPU_COMPILER_OPTIONS)
    except jax.errors.JaxRuntimeError:
        return False
    return True


def compiler_options(ynn_fusions: bool) -> dict[str, str]:
    """The options for a program on this process's backend: with `ynn_fusions` False, `CPU_COMPILER_OPTIONS` on a
    CPU whose XLA knows them; none otherwise (XLA's defaults)."""
    if ynn_fusions or jax.default_backend() != "cpu" or not _cpu_options_known():
        return {}
    return dict(CPU_COMPILER_OPTIONS)


def compile_ahead(fn: Callable[..., Any], *args: Any, donate_argnums: tuple[int, ...] = (),
                  ynn_fusions: bool = True, in_shardings: Any = None, out_shardings: Any = None,
                  store_key: str | None = None) -> Any:
    """`fn` compiled ahead of time for `args` (arrays or ShapeDtypeStructs) with `compiler_options(ynn_fusions)`;
    with `in_shardings`/`out_shardings` (a run over several devices, `rlfit.parallel.mesh`) laid out as they say;
    with `store_key`, traced only when rlfit's program store does not hold it (`lower_ahead`)."""
    return lower_ahead(fn, *args, donate_argnums=donate_argnums, in_shardings=in_shardings,
                       out_shardings=out_shardings, store_key=store_key).compile(
        compiler_options=compiler_options(ynn_fusions))


def lower_ahead(fn: Callable[..., Any], *args: Any, donate_argnums: tuple[int, ...] = (), in_shardings: Any = None,
                out_shardings: Any = None, store_key: str | None = None) -> Any:
    """`fn` jitted and lowered for `args`, not compiled. With `store_key` (everything `fn` depends on besides the
    arguments and the installed packages) the traced program comes from, or goes to, rlfit's program store
    (`rlfit.hardware.program_store`): a later process with the same key skips tracing and lowering `fn`."""
    from rlfit.hardware.program_store import store_dir, traced

    directory = store_dir() if store_key is not None else None
    stored = traced(fn, args, store_key, directory) if directory is not None else None
    if stored is not None:
        fn = stored.function()
    layout = {name: value for name, value in (("in_shardings", in_shardings), ("out_shardings", out_shardings))
              if value is not None}
    return jax.jit(fn, donate_argnums=donate_argnums, **layout).lower(*args)


def cache_dir() -> Path:
    """`RLFIT_CACHE_DIR`, else `$XDG_CACHE_HOME/rlfit`, else `~/.cache/rlfit`."""
    if os.environ.get("RLFIT_CACHE_DIR"):
        return Path(os.environ["RLFIT_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "rlfit"


def configure_jax(precision: str = "fp32") -> Path | None:
    """fp32 matmuls stay fp32 (no silent TF32 on Ampere+); compiled programs are cached on disk.

    Returns the compilation cache directory, or None when it cannot be used: a folder that cannot be created or
    written (a path that is a file, a read-only file system, a full disk). rlfit then compiles without a cache and
    says so in one note; so it does when writing an entry fails later in the run (the disk filled up), instead of
    JAX's warning per program.
    """
    jax.config.update("jax_default_matmul_precision", MATMUL_PRECISION[precision])
    directory = cache_dir() / "jax"
    problem = _unusable(directory)
    if problem is not None:
        _no_cache(directory, problem)
        return None
    jax.config.update("jax_compilation_cache_dir", str(directory))
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:  # JAX's own setting, when given, wins
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    _quiet_cache_failures(directory)
    return directory


def _unusable(directory: Path) -> str | None:
    """Why the cache folder cannot be used (created, then written), or None when it can."""
    import tempfile

    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory) as probe:
            probe.write(b"rlfit")
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as error:
        return error.strerror or str(error)
    return None


_NOTED: set[str] = set()
"""The cache folders already reported unusable in this process (one note each)."""


def _no_cache(directory: Path, problem: str) -> None:
    """Turns the persistent cache off and says so once per folder."""
    from jax.experimental.compilation_cache import compilation_cache

    jax.config.update("jax_enable_compilation_cache", False)
    compilation_cache.reset_cache()  # JAX decides once whether to use the cache; this makes it decide again
    if str(directory) in _NOTED:
        return
    _NOTED.add(str(directory))
    print(f"rlfit: note: no compile cache ({directory}: {problem}); compiling without it. Set RLFIT_CACHE_DIR to a "
          "writable folder with free space to keep compiled programs between runs", file=sys.stderr, flush=True)


CACHE_WARNING = re.compile(r"^Error (?:writing|reading) persistent compilation cache entry for '[^']*': (?P<cause>.*)$",
                           re.DOTALL)
"""The warning JAX gives for each cache entry it fails to write or read (compiling goes on without it)."""


def _quiet_cache_failures(directory: Path) -> None:
    """Replaces JAX's warning per failed cache entry by one note, and turns the cache off (every later entry
    would fail the same way)."""
    import warnings

    shown = warnings.showwarning
    if getattr(shown, "rlfit_cache_hook", False):
        return

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        failed = CACHE_WARNING.match(str(message))
        if failed is None:
            shown(message, category, filename, lineno, file, line)
            return
        _no_cache(Path(jax.config.jax_compilation_cache_dir or directory), failed["cause"].strip().splitlines()[0])

    show.rlfit_cache_hook = True  # type: ignore[attr-defined]
    warnings.showwarning = show
