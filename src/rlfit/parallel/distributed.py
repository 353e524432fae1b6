"""Several processes (hosts) training one run through `jax.distributed`: joining, who writes, agreeing to stop.

Every process runs the same program on its own devices; the mesh (`rlfit.parallel.mesh`) spans the devices of all of
them and XLA's collectives cross the processes (NCCL on GPUs; gloo on CPUs, which is how the tests run two
processes on one machine). Process 0 alone writes the run directory (metrics, TensorBoard, summaries,
checkpoint records); each process writes its own shards of the checkpoint's arrays (`rlfit.checkpoints.format`).
Decisions a single process could take alone (a SIGTERM it received, a time budget by its own clock) are
agreed on by all (`any_process`), so every process stops after the same iteration, with the same checkpoint;
an out-of-memory back-off needs every process to have run out (`all_reach`).

With one process every function here is the plain single-process behaviour.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlfit.errors import UserError


def initialize(coordinator: str | None = None, num_processes: int | None = None,
               process_id: int | None = None) -> None:
    """Joins this process to a multi-process run (`jax.distributed.initialize`), before JAX is used.

    Without arguments JAX detects the cluster (SLURM, Open MPI and the other environments it knows); else all
    three are needed. CPU devices communicate through gloo. Raises UserError when joining fails.
    """
    import jax

    given = {"coordinator_address": coordinator, "num_processes": num_processes, "process_id": process_id}
    if any(value is not None for value in given.values()) and any(value is None for value in given.values()):
        missing = [name for name, value in given.items() if value is None]
        raise UserError(f"--distributed needs --coordinator, --num-processes and --process-id together (or none, "
                        f"under SLURM or Open MPI); missing: {', '.join(missing)}")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    try:
        jax.distributed.initialize(**{name: value for name, value in given.items() if value is not None})
    except (RuntimeError, ValueError) as error:
        raise UserError(f"cannot join the distributed run: {str(error).splitlines()[0]}; give --coordinator "
                        "HOST:PORT --num-processes N --process-id I, or launch under SLURM or Open MPI") from None


def leave() -> None:
    """Leaves the multi-process run this process joined (`jax.distributed.shutdown`: the other processes' shutdown
    barrier counts it in), where it joined one; nothing otherwise. For a process about to end with `os._exit`,
    which skips the interpreter's exit handlers where JAX would do this: without it the other processes wait for
    this one's heartbeat until it times out, then abort."""
    import jax

    if jax.distributed.is_initialized():
        jax.distributed.shutdown()


def process_count() -> int:
    import jax

    return jax.process_count()


def is_writer() -> bool:
    """Whether this process writes the run directory (process 0; the only one without `jax.distributed`)."""
    import jax

    return jax.process_index() == 0


def any_process(flag: bool) -> bool:
    """True on every process when `flag` is True on any of them (a collective: every process must call it)."""
    if process_count() == 1:
        return flag
    from jax.experimental import multihost_utils

    return bool(np.any(multihost_utils.process_allgather(np.array([flag]))))


def barrier(name: str) -> None:
    """Returns once every process has reached the barrier called `name` (a collective; nothing on one process)."""
    if process_count() == 1:
        return
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices(name)


def all_reach(name: str, timeout_s: float) -> bool:
    """True once every process has reached the barrier called `name`, False when one has not within `timeout_s`
    (it is busy elsewhere: computing, or waiting in a collective). True at once on one process."""
    if process_count() == 1:
        return True
    from orbax.checkpoint import multihost

    try:
        multihost.get_jax_distributed_client().wait_at_barrier(name, int(timeout_s * 1000))
    except Exception:  # noqa: BLE001 - the coordination service reports a timeout as an error
        return False
    return True


def from_writer(value: int) -> int:
    """Process 0's `value` on every process (a collective)."""
    if process_count() == 1:
        return value
    from jax.experimental import multihost_utils

    return int(multihost_utils.broadcast_one_to_all(np.array(value, np.int64)))


def host_copy(array: Any) -> np.ndarray:
    """The whole of `array` in this process's memory, also where its shards live on other processes (then a
    collective: every process must call it)."""
    import jax

    if getattr(array, "is_fully_addressable", True) or getattr(array, "is_fully_replicated", False):
        return np.asarray(jax.device_get(array))
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(array, tiled=True))
