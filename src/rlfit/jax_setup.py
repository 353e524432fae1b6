"""Process-wide JAX settings rlfit relies on: explicit matmul precision, a persistent compile cache, and the XLA
options every ahead-of-time compile uses."""

from __future__ import annotations

import functools
import os
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
RESOURCE_EXHAUSTED (tests/test_oom_backoff.py)."""


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
                  ynn_fusions: bool = True, in_shardings: Any = None, out_shardings: Any = None) -> Any:
    """`fn` compiled ahead of time for `args` (arrays or ShapeDtypeStructs) with `compiler_options(ynn_fusions)`;
    with `in_shardings`/`out_shardings` (a run over several devices, `rlfit.mesh`) laid out as they say."""
    layout = {name: value for name, value in (("in_shardings", in_shardings), ("out_shardings", out_shardings))
              if value is not None}
    return jax.jit(fn, donate_argnums=donate_argnums, **layout).lower(*args).compile(
        compiler_options=compiler_options(ynn_fusions))


def cache_dir() -> Path:
    """`RLFIT_CACHE_DIR`, else `$XDG_CACHE_HOME/rlfit`, else `~/.cache/rlfit`."""
    if os.environ.get("RLFIT_CACHE_DIR"):
        return Path(os.environ["RLFIT_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "rlfit"


def configure_jax(precision: str = "fp32") -> Path | None:
    """fp32 matmuls stay fp32 (no silent TF32 on Ampere+); compiled programs are cached on disk.

    Returns the compilation cache directory, or None when it cannot be created (a read-only home: rlfit
    then compiles without a cache, and says so once).
    """
    jax.config.update("jax_default_matmul_precision", MATMUL_PRECISION[precision])
    directory = cache_dir() / "jax"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        print(f"rlfit: note: no compile cache ({directory}: {error.strerror or error}); set RLFIT_CACHE_DIR to a "
              "writable folder to keep compiled programs between runs", file=sys.stderr, flush=True)
        return None
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return directory
