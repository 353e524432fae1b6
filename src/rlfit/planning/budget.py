"""How many bytes a plan may use on its target device, the safety margin, and why."""

from __future__ import annotations

from dataclasses import dataclass

from rlfit.errors import UserError
from rlfit.hardware.cpu_envs import cpu_max_num_envs
from rlfit.hardware.probe import DeviceInfo, usable_cores
from rlfit.hardware.xla_memory import cpu_budget, gpu_budget
from rlfit.hardware.units import format_bytes

SAME_BACKEND_MARGIN = 1.15
"""Predicted bytes are multiplied by this when the prediction was compiled for the target's backend
(allocator fragmentation, the evaluation program, runtime workspaces)."""
CROSS_BACKEND_MARGIN = 1.5
"""... and by this when it was compiled for another backend (e.g. a GPU plan made on a CPU: other fusion and
buffer choices, and MJX's warp implementation on the GPU instead of the jax one)."""
TARGETS = ("gpu", "cpu")


@dataclass(frozen=True)
class Budget:
    """The device a plan is for and the bytes it may use there."""

    device: str
    """Human-readable target, e.g. 'gpu:NVIDIA H200' or 'a GPU with 16.00 GiB'."""
    target_backend: str
    budget_bytes: int
    reasons: tuple[str, ...]


def local_budget(device: DeviceInfo) -> Budget:
    """The budget on the device this process computes on (the probe's, or the CPU when JAX cannot use the GPU)."""
    if device.budget_bytes is None:
        raise UserError("cannot tell how much memory this device has; pass --device-memory SIZE (e.g. 16GiB)")
    label = f"{device.platform}:{device.name}"
    total = f"{format_bytes(device.total_bytes)} total" if device.total_bytes else "total unknown"
    reason = f"budget {format_bytes(device.budget_bytes)} on {label} ({total}): {device.budget_reason}"
    return Budget(label, device.platform, device.budget_bytes, (reason,))


def stated_budget(device_memory: int, target_backend: str, device: DeviceInfo) -> Budget:
    """The budget on a device of `device_memory` bytes (`--device-memory`), under this process's XLA settings."""
    if target_backend not in TARGETS:
        raise UserError(f"target must be one of {', '.join(TARGETS)}, got '{target_backend}'")
    if target_backend == "gpu":
        budget, why = gpu_budget(device_memory, None, device.xla)
        label = f"a GPU with {format_bytes(device_memory)}"
    else:
        budget, why = cpu_budget(device_memory)
        label = f"a CPU with {format_bytes(device_memory)} of RAM"
    reasons: tuple[str, ...] = (f"budget {format_bytes(budget)} on {label} (--device-memory): {why}",)
    if target_backend == "gpu" and device.xla.variables == ():
        reasons += ("the target is assumed to run with JAX's default memory settings, as this process does",)
    return Budget(label, target_backend, budget, reasons)


def margin_for(prediction_backend: str, target_backend: str, source: str = "xla") -> tuple[float, str]:
    """The safety margin for a prediction made on `prediction_backend` for a run on `target_backend`: from XLA's
    compile (`source` "xla") or an estimate from the lowered program ("lowered", `rlfit.planning.memory_model.MemoryModel`)."""
    how = (f"XLA's {prediction_backend} compile of the iteration" if source == "xla" else
           f"an estimate read from the iteration lowered for {prediction_backend}, not compiled")
    if prediction_backend == target_backend:
        return SAME_BACKEND_MARGIN, f"predicted from {how}, x{SAME_BACKEND_MARGIN:g} safety margin"
    return CROSS_BACKEND_MARGIN, (f"predicted on the {prediction_backend} backend for a {target_backend} run: "
                                  "compilers and MJX implementations differ, so the safety margin is widened to "
                                  f"x{CROSS_BACKEND_MARGIN:g} (run `rlfit plan` on the target for a closer figure)")


def num_envs_cap(target_backend: str, cpu_cores: int | None = None) -> int | None:
    """The most environments worth running on the target: on a CPU `cpu_max_num_envs` of `cpu_cores` (default:
    this process's), where more step no faster; None on an accelerator (memory alone decides)."""
    return cpu_max_num_envs(cpu_cores or usable_cores()) if target_backend == "cpu" else None
