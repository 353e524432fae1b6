"""The one set-up of a training process (`rlfit.run.opener`), which train, train_config, resume, restart and the seed
groups share: refusals come before JAX is configured and before anything is planned, JAX is configured for the run's
precision, and the plan is fitted to the device where the run asks."""

from __future__ import annotations

import pytest

from rlfit.config.schema import resolve
from rlfit.errors import UserError
from rlfit.hardware import probe
from rlfit.run import opener
from tests.conftest import TOY_ENV


@pytest.fixture
def calls(monkeypatch):
    """What the opener asked of JAX's set-up and of the planner, in order (neither really runs)."""
    made: list[tuple] = []
    monkeypatch.setattr(opener, "configure_jax", lambda precision: made.append(("configure_jax", precision)))
    monkeypatch.setattr(opener, "plan_for", lambda config, measurer, **asked: made.append(("plan_for", asked))
                        or "planned")
    return made


def test_open_session_configures_jax_then_plans_fitting_where_the_run_asks(calls):
    config = resolve(TOY_ENV, "smoke", overrides=["run.fit_to_device=true"])
    assert opener.open_session(config, measurer=None, device_memory="1GiB") == "planned"
    assert calls == [("configure_jax", "fp32"),
                     ("plan_for", {"device_memory": "1GiB", "auto_num_envs": True, "shrink_to_fit": False})]
    calls.clear()
    opener.open_session(resolve(TOY_ENV, "smoke"), measurer=None, shrink_to_fit=True)
    assert calls[1] == ("plan_for", {"device_memory": None, "auto_num_envs": False, "shrink_to_fit": True})


def test_missing_wandb_is_refused_before_jax_is_configured_or_anything_planned(calls, monkeypatch):
    import rlfit.sinks.wandb as wandb_sink

    monkeypatch.setattr(wandb_sink, "wandb_installed", lambda: False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    config = resolve(TOY_ENV, "smoke", overrides=["run.wandb=offline"])
    for open_process in (lambda: opener.open_session(config, measurer=None), lambda: opener.open_planned(config)):
        with pytest.raises(UserError, match="^run.wandb=offline needs W&B"):
            open_process()
    assert calls == []


def test_a_resumed_runs_bf16_is_refused_on_a_t4_before_jax_is_configured(calls, monkeypatch):
    t4 = probe.gpu_info(probe.Accelerator("gpu", "Tesla T4", 1, 16 * 2**30, 15 * 2**30, "7.5"), "JAX", "gpu", "test",
                        probe.read_xla_memory_settings({}), [])
    monkeypatch.setattr(probe, "probe_device", lambda: t4)
    with pytest.raises(UserError, match="set run.precision=fp32$"):
        opener.open_planned(resolve(TOY_ENV, "smoke", overrides=["run.precision=bf16"]))
    assert calls == []
    opener.open_planned(resolve(TOY_ENV, "smoke"))
    assert calls == [("configure_jax", "fp32")]
