"""The `rlfit doctor --full` validation suite: each check runs something real and reports a figure.

    matmul benchmark (vs the profile's peak) -> network forward/backward -> allocation up to the budget
    -> a two-iteration training run of the default environment

A check never raises: an error becomes a failed `CheckResult` with the error's first line.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlfit.hardware.probe import DeviceInfo, short_error

if TYPE_CHECKING:
    from rlfit.algos.contract import Variables

MIN_PEAK_FRACTION = 0.10
"""The matmul check fails below this fraction of the profile's FP32 peak (a throttled or misconfigured GPU)."""
CPU_ALLOCATION_CAP = 1 << 30
"""On the CPU the allocation check stops at 1 GiB: host RAM is shared with everything else."""
GPU_ALLOCATION_FRACTION = 0.9
"""On an accelerator the allocation check fills this fraction of the budget."""
CHUNK_BYTES = 256 << 20


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome: pass/fail and its figure (e.g. '41.2 TFLOP/s fp32 (62% of peak)')."""

    name: str
    passed: bool
    figure: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "figure": self.figure}


def run_checks(device: DeviceInfo, on_result: Callable[[CheckResult], None] | None = None) -> tuple[CheckResult, ...]:
    """Runs every check in order; `on_result` sees each result as soon as it is known."""
    checks: tuple[tuple[str, Callable[[DeviceInfo], CheckResult]], ...] = (
        ("matmul", check_matmul), ("network", check_network), ("allocation", check_allocation),
        ("training", check_training))
    results = []
    for name, check in checks:
        try:
            result = check(device)
        except Exception as error:  # noqa: BLE001 - a failing check is a result, not a crash
            result = CheckResult(name, False, short_error(error))
        results.append(result)
        if on_result is not None:
            on_result(result)
    return tuple(results)


def check_matmul(device: DeviceInfo) -> CheckResult:
    """FP32 matmul throughput (highest precision: no TF32), checked for correctness against numpy."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    n = 4096 if device.jax_uses_it and device.is_accelerator else 1024
    a, b = jax.random.normal(jax.random.PRNGKey(0), (2, n, n), jnp.float32)
    matmul = jax.jit(lambda x, y: jnp.matmul(x, y, precision=jax.lax.Precision.HIGHEST))
    product = matmul(a, b).block_until_ready()
    repeats, started = 5, time.perf_counter()
    for _ in range(repeats):
        product = matmul(a, b)
    product.block_until_ready()
    seconds = (time.perf_counter() - started) / repeats
    tflops = 2 * n**3 / seconds / 1e12
    reference = np.asarray(a[:8], np.float64) @ np.asarray(b, np.float64)[:, :8]
    error = float(np.max(np.abs(np.asarray(product[:8, :8]) - reference)) / np.max(np.abs(reference)))
    figure = f"{tflops:.3g} TFLOP/s fp32 ({n}x{n}), max relative error {error:.1e}"
    profile = device.profile if device.jax_uses_it else None
    if profile is None:
        return CheckResult("matmul", error < 1e-3, figure + "; no GPU profile to compare with")
    peak = profile.peak_fp32_tflops
    fraction = tflops / peak
    return CheckResult("matmul", error < 1e-3 and fraction >= MIN_PEAK_FRACTION,
                       figure + f"; {fraction:.0%} of the {profile.name}'s {peak:g} TFLOP/s peak")


def check_network(device: DeviceInfo) -> CheckResult:
    """A forward and backward pass of a policy and a value MLP of PPO's default sizes (the `ppo` section: 64
    observations, 8 continuous actions, so 16 policy outputs) on a batch of observations."""
    import jax
    import jax.numpy as jnp

    from rlfit.config.schema import Config
    from rlfit.networks import MLP, forward

    batch = 4096 if device.jax_uses_it and device.is_accelerator else 1024
    sizes = Config().ppo
    policy = MLP(tuple(sizes.policy_hidden) + (16,), sizes.activation)
    value = MLP(tuple(sizes.value_hidden) + (1,), sizes.activation)
    obs = jax.random.normal(jax.random.PRNGKey(1), (batch, 64))
    policy_key, value_key = jax.random.split(jax.random.PRNGKey(0))
    params = (policy.init(policy_key, obs[:1]), value.init(value_key, obs[:1]))

    def loss(p: tuple[Variables, Variables]) -> jax.Array:
        return jnp.mean(forward(policy, p[0], obs) ** 2) + jnp.mean(forward(value, p[1], obs) ** 2)

    step = jax.jit(jax.value_and_grad(loss))
    value, grads = step(params)
    jax.block_until_ready(grads)
    started = time.perf_counter()
    value, grads = step(params)
    jax.block_until_ready(grads)
    milliseconds = (time.perf_counter() - started) * 1e3
    finite = math.isfinite(float(value)) and all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(grads))
    return CheckResult("network", finite, f"forward+backward of a batch of {batch} in {milliseconds:.1f} ms; "
                       f"gradients {'finite' if finite else 'NOT finite'}")


def check_allocation(device: DeviceInfo) -> CheckResult:
    """Allocates (and touches) memory up to the planned budget in 256 MiB blocks, then frees it."""
    import jax.numpy as jnp

    from rlfit.hardware.units import format_bytes

    if device.budget_bytes is None:
        return CheckResult("allocation", False, "no budget known for this device")
    on_cpu = not (device.jax_uses_it and device.is_accelerator)
    target = min(device.budget_bytes, CPU_ALLOCATION_CAP) if on_cpu else int(device.budget_bytes * GPU_ALLOCATION_FRACTION)
    blocks, allocated = [], 0
    try:
        while allocated < target:
            size = min(CHUNK_BYTES, target - allocated)
            blocks.append(jnp.ones(max(size // 4, 1), jnp.float32).block_until_ready())
            allocated += size
    except Exception as error:  # noqa: BLE001
        return CheckResult("allocation", False, f"{format_bytes(allocated)} of {format_bytes(target)} before "
                                                f"{short_error(error)}")
    finally:
        del blocks
    scope = f"capped at {format_bytes(CPU_ALLOCATION_CAP)} on the CPU" if on_cpu else \
        f"{GPU_ALLOCATION_FRACTION:.0%} of the {format_bytes(device.budget_bytes)} budget"
    return CheckResult("allocation", True, f"allocated {format_bytes(allocated)} ({scope})")


def check_training(device: DeviceInfo) -> CheckResult:
    """Two training iterations of the default environment (preset smoke) into a temporary run directory."""
    from rlfit.run.session import train
    from rlfit.config.schema import DEFAULT_ENV

    with tempfile.TemporaryDirectory(prefix="rlfit-doctor-") as directory:
        result = train(DEFAULT_ENV, preset="smoke", overrides=["run.num_timesteps=128"],
                       run_dir=Path(directory) / "run", quiet=True)
    summary = result.record
    assert summary is not None, "a single run's result has its summary"
    reward = summary.final_eval_reward
    passed = summary.iterations == 2 and reward is not None and math.isfinite(reward)
    evaluation = f"eval reward {reward:.1f}" if reward is not None else "no evaluation"
    return CheckResult("training", passed, f"{summary.iterations} iterations of {DEFAULT_ENV} (preset smoke): "
                       f"compile {summary.compile_s:.1f} s, {summary.sps_mean or 0:,.0f} steps/s, {evaluation}")
