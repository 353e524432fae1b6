"""How many seeds share a compiled program: one on a CPU, a GPU's memory, several devices, the
manifest's own count; and the compiled group program's own check against the budget."""

from __future__ import annotations

from types import SimpleNamespace

import jax
import jax.numpy as jnp

from rlfit.planning.budget import SAME_BACKEND_MARGIN
from rlfit.planning.seed_groups import group_fits, seeds_per_program

GiB = 1 << 30


def plan(backend="cpu", num_envs=512, predicted_bytes=None, devices=1, source="xla"):
    return SimpleNamespace(backend=backend, sizes=SimpleNamespace(num_envs=num_envs), predicted_bytes=predicted_bytes,
                           devices=devices, extra={"memory_model": {"source": source}})


def device(budget_bytes=16 * GiB):
    return SimpleNamespace(budget_bytes=budget_bytes)


def test_on_a_cpu_seeds_train_one_after_another():
    for num_envs in (32, 256, 512):
        chosen = seeds_per_program(plan("cpu", num_envs), 8, None, device())
        assert chosen.size == 1 and "one after another" in chosen.reason


def test_on_a_gpu_as_many_seeds_as_the_predicted_bytes_allow():
    one_seed = 1 * GiB
    chosen = seeds_per_program(plan("gpu", 4096, one_seed), 16, None, device(10 * GiB))
    assert chosen.size == int(10 // SAME_BACKEND_MARGIN)  # 8 seeds of 1.15 GiB in 10 GiB
    assert seeds_per_program(plan("gpu", 4096, one_seed), 4, None, device(10 * GiB)).size == 4
    assert seeds_per_program(plan("gpu", 4096, 20 * GiB), 4, None, device(10 * GiB)).size == 1
    unknown = seeds_per_program(plan("gpu", 4096, None), 6, None, device(10 * GiB))
    assert unknown.size == 6 and "checked on the compiled program" in unknown.reason


def test_a_seed_estimated_without_compiling_is_said_to_be_estimated():
    """A plan whose memory is the estimate from the lowered step (`source` "lowered") groups seeds by that figure,
    and the reason says it is an estimate, not XLA's prediction."""
    bounded = seeds_per_program(plan("gpu", 4096, 1 * GiB, source="lowered"), 16, None, device(10 * GiB))
    predicted = seeds_per_program(plan("gpu", 4096, 1 * GiB), 16, None, device(10 * GiB))
    assert bounded.size == predicted.size == int(10 // SAME_BACKEND_MARGIN)
    assert "one seed is estimated at 1.15 GiB" in bounded.reason
    assert "one seed is predicted at 1.15 GiB" in predicted.reason


def test_several_devices_and_the_manifests_count():
    assert seeds_per_program(plan("gpu", devices=2), 8, None, device()).size == 1
    assert seeds_per_program(plan("cpu", 512), 8, 4, device()).size == 4  # the manifest wins
    assert seeds_per_program(plan("cpu", 512), 3, 8, device()).size == 3


def test_the_compiled_group_is_checked_against_the_budget():
    compiled = jax.jit(lambda x: jnp.tanh(x) * 2).lower(jax.ShapeDtypeStruct((1024, 1024), jnp.float32)).compile()
    analysis = compiled.memory_analysis()
    needed = (analysis.argument_size_in_bytes + analysis.output_size_in_bytes - analysis.alias_size_in_bytes
              + analysis.temp_size_in_bytes + analysis.generated_code_size_in_bytes) * SAME_BACKEND_MARGIN
    assert needed >= 8 * 1024 * 1024  # at least the 4 MiB argument and the 4 MiB result
    assert group_fits(compiled, device(int(needed) + 1))[0]
    fits, reason = group_fits(compiled, device(int(needed) - 1))
    assert not fits and "budget" in reason
