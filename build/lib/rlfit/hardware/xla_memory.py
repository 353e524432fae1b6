"""The XLA/JAX memory settings in effect and the device-memory budget they leave a JAX process.

JAX's GPU client reads these environment variables once, when the backend starts:

- `XLA_PYTHON_CLIENT_PREALLOCATE` (default true): reserve the pool up front.
- `XLA_CLIENT_MEM_FRACTION` (or its deprecated name `XLA_PYTHON_CLIENT_MEM_FRACTION`; JAX refuses both at
  once), default 0.75: the pool is this fraction of the device's *total* memory.
- `XLA_PYTHON_CLIENT_ALLOCATOR` (`default`, `platform`, `bfc`, `cuda_async`, `vmm`): `platform` allocates on
  demand with no pool, so the whole free memory is usable (slowly).

All functions here are pure: they take the environment as a mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_MEM_FRACTION = 0.75
"""JAX's default pool size as a fraction of total GPU memory."""
CPU_RAM_FRACTION = 0.75
"""On the CPU backend rlfit plans to use at most this fraction of the available RAM (the rest: Python, the
compiler, the OS and other processes)."""
FRACTION_VARIABLES = ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION")
VARIABLES = ("XLA_PYTHON_CLIENT_PREALLOCATE", *FRACTION_VARIABLES, "XLA_PYTHON_CLIENT_ALLOCATOR")
ALLOCATORS = ("default", "platform", "bfc", "cuda_async", "vmm")


@dataclass(frozen=True)
class XlaMemorySettings:
    """How JAX will manage GPU memory in this process (defaults where a variable is unset or invalid)."""

    preallocate: bool
    mem_fraction: float
    """Pool size as a fraction of total device memory, in (0, 1]."""
    fraction_source: str
    """The variable `mem_fraction` came from, or 'default'."""
    allocator: str
    variables: tuple[tuple[str, str], ...]
    """The memory variables that are set, as (name, value) pairs."""
    problems: tuple[str, ...] = ()
    """Settings JAX will reject or that rlfit ignored, one sentence each."""

    @property
    def pooled(self) -> bool:
        """False for the `platform` allocator (no pool: allocate and free on demand)."""
        return self.allocator != "platform"

    def describe(self) -> str:
        """'preallocate=true, mem_fraction=0.75 (default), allocator=default'."""
        return (f"preallocate={'true' if self.preallocate else 'false'}, "
                f"mem_fraction={self.mem_fraction:g} ({self.fraction_source}), allocator={self.allocator}")

    def to_dict(self) -> dict[str, object]:
        return {"preallocate": self.preallocate, "mem_fraction": self.mem_fraction,
                "fraction_source": self.fraction_source, "allocator": self.allocator,
                "variables": dict(self.variables), "problems": list(self.problems)}


def read_xla_memory_settings(environ: Mapping[str, str]) -> XlaMemorySettings:
    """The settings `environ` (e.g. `os.environ`) implies, with a problem noted for each bad value."""
    problems: list[str] = []
    preallocate_text = environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "")
    preallocate = preallocate_text.strip() not in ("false", "False", "0")
    fraction, source = DEFAULT_MEM_FRACTION, "default"
    given = [name for name in FRACTION_VARIABLES if environ.get(name, "")]
    if len(given) == 2:
        problems.append("both XLA_CLIENT_MEM_FRACTION and XLA_PYTHON_CLIENT_MEM_FRACTION are set; JAX refuses to "
                        "start the GPU backend: unset XLA_PYTHON_CLIENT_MEM_FRACTION")
    if given:
        name = given[0]
        try:
            value = float(environ[name])
        except ValueError:
            value = -1.0
        if 0 < value <= 1:
            fraction, source = value, name
        else:
            problems.append(f"{name}={environ[name]!r} is not a fraction in (0, 1]; planning with "
                            f"{DEFAULT_MEM_FRACTION}")
    allocator = environ.get("XLA_PYTHON_CLIENT_ALLOCATOR", "default").lower() or "default"
    if allocator not in ALLOCATORS:
        problems.append(f"XLA_PYTHON_CLIENT_ALLOCATOR={allocator!r} is not one of {', '.join(ALLOCATORS)}; "
                        "JAX refuses it")
        allocator = "default"
    variables = tuple((name, environ[name]) for name in VARIABLES if name in environ)
    return XlaMemorySettings(preallocate, fraction, source, allocator, variables, tuple(problems))


def gpu_budget(total_bytes: int, free_bytes: int | None, settings: XlaMemorySettings) -> tuple[int, str]:
    """Bytes a JAX process may use on a GPU with `total_bytes` of memory, and why.

    Pooled allocators cap the pool at `mem_fraction * total` (whether preallocated or grown); the
    `platform` allocator has no pool, so what is free (else the total) is the limit.
    """
    if not settings.pooled:
        limit = free_bytes if free_bytes is not None else total_bytes
        return limit, "the platform allocator has no pool: the free device memory is the limit"
    budget = int(total_bytes * settings.mem_fraction)
    how = "preallocates" if settings.preallocate else "lets its pool grow to"
    reason = f"JAX {how} {settings.mem_fraction:g} of the total memory ({settings.fraction_source})"
    if free_bytes is not None and free_bytes < budget:
        return free_bytes, reason + ", but only the free memory is left (other processes hold the rest)"
    return budget, reason


def cpu_budget(available_bytes: int) -> tuple[int, str]:
    """Bytes rlfit plans to use on the CPU backend, where device memory is the host's RAM."""
    return int(available_bytes * CPU_RAM_FRACTION), f"{CPU_RAM_FRACTION:g} of the available RAM (CPU backend)"
