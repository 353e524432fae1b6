"""The devices a run trains on, and how its training state is laid out over them (data parallel, one process).

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

import numpy as np

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
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        self.count = count
        self.mesh = Mesh(np.array(jax.devices()[:count]), (AXIS,))
        self.replicated = NamedSharding(self.mesh, PartitionSpec())
        self._split = [NamedSharding(self.mesh, PartitionSpec(*([None] * axis), AXIS)) for axis in range(8)]

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

        def sharding(leaf: Any, axis: int) -> Any:
            if axis == REPLICATED or axis >= len(leaf.shape) or leaf.shape[axis] % self.count:
                return self.replicated
            return self._split[axis]

        return jax.tree.map(sharding, abstract_state, env_axes)

    def place(self, tree: Any, shardings: Any) -> Any:
        """`tree` (host or device arrays) laid out as `shardings`; arrays already laid out so stay put."""
        import jax

        return jax.device_put(tree, shardings)

    def describe(self) -> dict[str, Any]:
        """What plan.json and summary.json record of the mesh."""
        devices = list(self.mesh.devices.flat)
        return {"axis": AXIS, "devices": self.count, "processes": len({d.process_index for d in devices}),
                "kinds": sorted({getattr(d, "device_kind", d.platform) for d in devices}),
                "ids": [int(d.id) for d in devices]}
