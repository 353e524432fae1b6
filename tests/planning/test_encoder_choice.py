"""`network.encoder=auto` for pixels on an accelerator: R3D-18 where the planner finds a configuration of it that
fits, else the CPU's encoder for the frames; the reason says which and why. Memory models are given (no compile)."""

from __future__ import annotations

import pytest

from rlfit.config.schema import resolve
from rlfit.hardware import probe
from rlfit.planning.memory_model import MemoryModel
from rlfit.planning.device_plan import encoder_candidates
from rlfit.planning.device_plan import PlanRequest, memory_plan

GIB = 2**30
PIXELS = ["env.observation=pixels", "env.image_size=16", "env.frames=3"]
NO_MEASURER = None
"""The models are given: the planner measures nothing (a measure would fail on None)."""


def config(*overrides):
    return resolve("CartpoleBalance", "smoke", None, ["algo=sac", *PIXELS, *overrides])


def model(per_transition: float, intercept: float) -> MemoryModel:
    return MemoryModel(intercept_bytes=intercept, bytes_per_env=1e3, bytes_per_transition=per_transition, points=(),
                       backend="gpu")


@pytest.fixture
def cpu():
    return probe.cpu_info("cpu", "test", probe.read_xla_memory_settings({}), [])


def test_the_candidates():
    assert encoder_candidates(config("network.encoder=auto"), "gpu") == ("r3d18", "simple2dcnn")
    assert encoder_candidates(config("network.encoder=auto", "env.frames=8"), "gpu") == ("r3d18", "simple3dcnn")
    assert encoder_candidates(config("network.encoder=auto"), "cpu") == (None,)  # decided without memory
    assert encoder_candidates(config("network.encoder=simple3dcnn"), "gpu") == (None,)  # the user's choice
    assert encoder_candidates(resolve("CartpoleBalance", "smoke", None, ["algo=sac"]), "gpu") == (None,)


def test_r3d18_where_it_fits_else_the_small_encoder_with_the_reason(cpu):
    models = {"r3d18": model(1e4, 20 * GIB), "simple2dcnn": model(1e4, 1 * GIB)}
    big = memory_plan(config("network.encoder=auto"), NO_MEASURER, PlanRequest("80GiB", "gpu"), cpu, dict(models))
    assert big.chosen is not None and big.config.network.encoder == "r3d18"
    assert big.reasons[0].startswith("network.encoder=auto on gpu: r3d18 fits")
    assert big.to_dict()["encoder"] == "r3d18"
    small = memory_plan(config("network.encoder=auto"), NO_MEASURER, PlanRequest("16GiB", "gpu"), cpu, dict(models))
    assert small.chosen is not None and small.config.network.encoder == "simple2dcnn"
    assert "r3d18 does not fit the budget" in small.reasons[0] and "planned simple2dcnn instead" in small.reasons[0]
    assert small.chosen.predicted_bytes <= small.budget.budget_bytes
    # the config given is unchanged, only the plan's names the encoder
    assert config("network.encoder=auto").network.encoder == "auto"
