"""The devices a run trains on, and how its training state is laid out over them (data parallel).

One mesh axis, `envs`. Every array with an environments axis (the environments' states; a replay buffer's
transitions, stored per environment) is split along it, so each device steps and stores its share of the
environments; everything else (parameters, optimizer state, normalizer statistics, keys) is replicated. The
training step stays the same pure function as on one device: it is compiled with these shardings and XLA's
partitioner inserts the collectives, so a mean over environments (the gradient, the normalizer's statistics)
is reduced across devices inside the compiled program.

Sizes in the config are global (`ppo.num_envs` is the total over every device); the one rule that follows,
`num_envs` divisible by the device count, is checked up front with the nearest valid values.

One device is today's path exactly: no shardings are given to JAX at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlfit.errors import UserError

AXIS = "envs"
REPLICATED = -1
"""The `env_axes` value of a leaf that every device holds whole."""


def parse_devices(value: str) -> int | None:
    """`run.devices` as a count (None for 'auto'); raises UserError for anything else."""
    text = str(value).strip().lower()
    if text == "auto":
        return None
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise UserError(f"run.devices must be auto or a positive number of devices, got '{value}'")


def device_count(requested: str, available: int, backend: str) -> int:
    """How many of this process's `available` devices a run with `run.devices = requested` uses."""
    count = parse_devices(requested)
    if count is None:
        return available
    if count > available:
        raise UserError(f"run.devices={count} but this process sees {available} {backend} device"
                        f"{'s' if available != 1 else ''}; set run.devices to auto or at most {available}")
    return count


def check_divisible(num_envs: int, devices: int, key: str, valid: Callable[[int], bool] = lambda n: True) -> None:
    """Raises UserError unless `num_envs` splits evenly over `devices`, naming the nearest totals that split and
    pass `valid` (the algorithm's other rules), and the device counts that would take `num_envs` as it is."""
    if devices <= 1 or num_envs % devices == 0:
        return
    floor = num_envs - num_envs % devices
    below = next((n for n in range(floor, max(0, floor - 1000 * devices), -devices) if valid(n)), None)
    above = next((n for n in range(floor + devices, floor + 1000 * devices, devices) if valid(n)), None)
    nearest = [n for n in (below, above) if n]
    counts = [d for d in range(devices - 1, 0, -1) if num_envs % d == 0]
    options = [f"{key}={' or '.join(map(str, nearest))}"] if nearest else []
    options.append(f"run.devices={counts[0]}")
    raise UserError(f"{key}={num_envs} does not split over {devices} devices (it is the total over all of them); "
                    f"use {' or '.join(options)}")


def split_envs(tree: Any, axis: int) -> Any:
    """Inside a step compiled over several devices (the trainer sets the mesh while compiling): `tree`'s leaves
    kept split along `axis`, their environments (or sequences) axis, so the work on them is split too rather
    than repeated on every device. Without a mesh (one device) `tree` unchanged. Values are never changed."""
    import jax
    from jax.sharding import PartitionSpec

    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty or AXIS not in mesh.axis_names:
        return tree
    count = mesh.shape[AXIS]
    spec = PartitionSpec(*([None] * axis), AXIS)
    return jax.tree.map(lambda x: jax.lax.with_sharding_constraint(x, spec)
                        if x.ndim > axis and x.shape[axis] % count == 0 else x, tree)


def take_by_env(buffer: Any, rows: Any, envs: Any) -> Any:
    """`buffer[rows, envs]` for a `buffer` [R, N, ...] stored per environment (axis 1) and index arrays of one
    shape S: [*S, ...]. Inside a step compiled over several devices (`split_envs`) N is split, so each device
    gathers the entries it holds, zeros elsewhere, and one sum over devices assembles them (the same values:
    adding zeros), instead of the compiler collecting the whole buffer on every device."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec

    def take(block: Any, rows_: Any, envs_: Any) -> Any:
        return block.reshape((-1,) + block.shape[2:])[rows_ * block.shape[1] + envs_]

    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty or AXIS not in mesh.axis_names or buffer.shape[1] % mesh.shape[AXIS]:
        return take(buffer, rows, envs)

    def local(block: Any, rows_: Any, envs_: Any) -> Any:
        first = jax.lax.axis_index(AXIS) * block.shape[1]
        mine = (envs_ >= first) & (envs_ < first + block.shape[1])
        values = take(block, rows_, jnp.clip(envs_ - first, 0, block.shape[1] - 1))
        kept = jnp.where(mine.reshape(mine.shape + (1,) * (values.ndim - mine.ndim)), values, 0)
        narrow = kept.dtype == jnp.bool_ or (jnp.issubdtype(kept.dtype, jnp.integer) and kept.dtype.itemsize < 4)
        return jax.lax.psum(kept.astype(jnp.int32) if narrow else kept, AXIS).astype(kept.dtype)

    return jax.shard_map(local, in_specs=(PartitionSpec(None, AXIS), PartitionSpec(), PartitionSpec()),
                         out_specs=PartitionSpec())(buffer, rows, envs)


def default_env_axes(state: Any) -> Any:
    """Per leaf of a training state, the axis that indexes environments: axis 0 of `state.env_state`'s leaves;
    every other leaf replicated (`REPLICATED`)."""
    import jax

    axes = jax.tree.map(lambda _: REPLICATED, state)
    return axes._replace(env_state=jax.tree.map(lambda _: 0, state.env_state))


class DeviceLayout:
    """A run's mesh of `count` devices (of every process, with `jax.distributed`) and its state's shardings."""

    def __init__(self, count: int):
        import jax
        import numpy as np
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        self.count = count  # of jax.devices(): every process's, in a run over several (`rlfit.parallel.distributed`)
        self.mesh = Mesh(np.array(jax.devices()[:count]), (AXIS,))
        self.replicated = NamedSharding(self.mesh, PartitionSpec())
        self.single = jax.sharding.SingleDeviceSharding(jax.devices()[0])
        """On one device, where every array of the run lies: committed there, so that a fresh state, a restored
        one (Orbax commits what it reads) and the abstract state all lower to the same program, which the
        persistent compile cache then finds again in a resumed process."""

    @property
    def parallel(self) -> bool:
        """More than one device: arrays carry shardings."""
        return self.count > 1

    def local_devices(self) -> list[Any]:
        """The mesh's devices that belong to this process."""
        import jax

        return [d for d in self.mesh.devices.flat if d.process_index == jax.process_index()]

    def shardings(self, abstract_state: Any, env_axes: Any) -> Any:
        """The sharding of each leaf of `abstract_state` (shapes), split along its entry in `env_axes`."""
        import jax

        from jax.sharding import NamedSharding, PartitionSpec

        def sharding(leaf: Any, axis: int) -> Any:
            if axis == REPLICATED or axis >= len(leaf.shape) or leaf.shape[axis] % self.count:
                return self.replicated
            return NamedSharding(self.mesh, PartitionSpec(*([None] * axis), AXIS))

        return jax.tree.map(sharding, abstract_state, env_axes)

    def compiling(self) -> Any:
        """A context for tracing the step: the mesh set for `split_envs` over several devices, nothing on one."""
        import contextlib

        import jax

        return jax.set_mesh(self.mesh) if self.parallel else contextlib.nullcontext()

    def describe(self) -> dict[str, Any]:
        """What plan.json and summary.json record of the mesh."""
        devices = list(self.mesh.devices.flat)
        return {"axis": AXIS, "devices": self.count, "processes": len({d.process_index for d in devices}),
                "kinds": sorted({getattr(d, "device_kind", d.platform) for d in devices}),
                "ids": [int(d.id) for d in devices]}
