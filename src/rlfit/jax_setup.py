"""Process-wide JAX settings rlfit relies on: explicit matmul precision and a persistent compile cache."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import jax

MATMUL_PRECISION = {"fp32": "highest", "bf16": "default", "fp16": "default"}


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
