"""How many seeds share a compiled program: the CPU's environment cap, a GPU's memory, several devices, the
manifest's own count; and the compiled group program's own check against the budget."""

from __future__ import annotations

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import pytest

from rlfit.planning.budget import SAME_BACKEND_MARGIN
from rlfit.planning.seed_groups import group_fits, seeds_per_program

GiB = 1 << 30


def plan(backend="cpu", num_envs=512, predicted_bytes=None, devices=1):
    return SimpleNamespace(backend=backend, sizes=SimpleNamespace(num_envs=num_envs), predicted_bytes=predicted_bytes,
                           devices=devices)


def device(budget_bytes=16 * GiB):
    return SimpleNamespace(budget_bytes=budget_bytes)


@pytest.mark.parametrize("cores, num_envs, seeds, expected", [
    (2, 512, 8, 1),    # CartpoleBalance quick already fills 2 cores (cap 512 environments)
    (2, 256, 10, 2),   # the mdl_vs_ood study's 256 environments
    (2, 64, 8, 8),
    (2, 32, 3, 3),     # never more than the seeds there are
    (32, 512, 40, 16),  # cap 8192
])
def test_on_a_cpu_the_seeds_environments_stay_within_the_cores_cap(cores, num_envs, seeds, expected):
    chosen = seeds_per_program(plan("cpu", num_envs), seeds, None, device(), cores=cores)
    assert chosen.size == expected
    assert f"{cores} cores" in chosen.reason


def test_on_a_gpu_as_many_seeds_as_the_predicted_bytes_allow():
    one_seed = 1 * GiB
    chosen = seeds_per_program(plan("gpu", 4096, one_seed), 16, None, device(10 * GiB))
    assert chosen.size == int(10 // SAME_BACKEND_MARGIN)  # 8 seeds of 1.15 GiB in 10 GiB
    assert seeds_per_program(plan("gpu", 4096, one_seed), 4, None, device(10 * GiB)).size == 4
    assert seeds_per_program(plan("gpu", 4096, 20 * GiB), 4, None, device(10 * GiB)).size == 1
    unknown = seeds_per_program(plan("gpu", 4096, None), 6, None, device(10 * GiB))
    assert unknown.size == 6 and "checked on the compiled program" in unknown.reason


def test_several_devices_and_the_manifests_count():
    assert seeds_per_program(plan("gpu", devices=2), 8, None, device()).size == 1
    assert seeds_per_program(plan("cpu", 512), 8, 4, device(), cores=2).size == 4  # the manifest wins
    assert seeds_per_program(plan("cpu", 512), 3, 8, device(), cores=2).size == 3


def test_the_compiled_group_is_checked_against_the_budget():
    compiled = jax.jit(lambda x: jnp.tanh(x) * 2).lower(jax.ShapeDtypeStruct((1024, 1024), jnp.float32)).compile()
    analysis = compiled.memory_analysis()
    needed = (analysis.argument_size_in_bytes + analysis.output_size_in_bytes - analysis.alias_size_in_bytes
              + analysis.temp_size_in_bytes + analysis.generated_code_size_in_bytes) * SAME_BACKEND_MARGIN
    assert needed >= 8 * 1024 * 1024  # at least the 4 MiB argument and the 4 MiB result
    assert group_fits(compiled, device(int(needed) + 1))[0]
    fits, reason = group_fits(compiled, device(int(needed) - 1))
    assert not fits and "budget" in reason
