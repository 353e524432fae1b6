"""SAC's memory plan: the replay buffer is planned down to the budget, an impossible min_replay_size is refused."""

from __future__ import annotations

import json

import pytest

from rlfit.algos.offpolicy.memory_rules import largest_fitting_rows, stored_transitions
from rlfit.algos.offpolicy.sizes import ReplaySizes, section_sizes
from rlfit.cli import main
from rlfit.config.schema import resolve
from rlfit.hardware.probe import cpu_info
from rlfit.hardware.xla_memory import read_xla_memory_settings
from rlfit.planning.budget import SAME_BACKEND_MARGIN, stated_budget
from rlfit.planning.memory_model import MemoryModel, MemoryPoint
from rlfit.planning.fit import memory_plan_from_model

TOY = "tests.toy_env:make"
MIB = 1 << 20
CPU = cpu_info("cpu", "test", read_xla_memory_settings({}), [])
BIG = ["sac.max_replay_size=1000000", "sac.min_replay_size=1000"]


def sac_config(*overrides: str):
    return resolve(TOY, "smoke", overrides=["algo=sac", *BIG, *overrides])


def model(intercept: float = 2e6, per_env: float = 1e4, per_transition: float = 24.0) -> MemoryModel:
    point = MemoryPoint(ReplaySizes(8, 8, 512, 8), 0, 0, 0, 0, 0, 512)
    return MemoryModel(intercept, per_env, per_transition, (point,), "cpu")


def plan_at(config, budget_bytes: int):
    return memory_plan_from_model(config, model(), stated_budget(int(budget_bytes / 0.75), "cpu", CPU))


def test_the_buffer_is_the_largest_whole_number_of_policy_steps_that_fits():
    config = sac_config()
    planned = plan_at(config, 12 * MIB)
    chosen = planned.chosen.sizes
    assert (chosen.num_envs, chosen.batch_size) == (8, 8)  # the config's: they set the update-to-data ratio
    # independent reference: the model solved for the transitions, rounded down to whole policy steps of 8
    room = 12 * MIB / SAME_BACKEND_MARGIN - 2e6 - 8 * 1e4
    assert chosen.max_replay_size == int(room / 24) // 8 * 8
    assert planned.chosen.predicted_bytes <= planned.budget.budget_bytes
    assert any(r.startswith("memory, not the config, set max_replay_size: the config's 1,000,000") for r in planned.reasons)
    assert [c.sizes.max_replay_size for c in planned.candidates] == [1000, chosen.max_replay_size, 1_000_000]
    assert not planned.requested.fits


def test_a_buffer_that_fits_is_the_configs():
    planned = plan_at(sac_config(), 64 * MIB)
    assert planned.chosen.sizes.max_replay_size == 1_000_000
    assert any("max_replay_size=1,000,000 from the config fits" in r for r in planned.reasons)


def test_a_min_replay_size_that_cannot_fit_names_the_setting():
    planned = plan_at(sac_config("sac.min_replay_size=900000"), 12 * MIB)
    assert planned.chosen is None
    assert "even num_envs=8 batch_size=8 max_replay_size=900000 is predicted at" in planned.nothing_fits
    assert "sac.min_replay_size=900,000 needs at least that buffer" in planned.nothing_fits


def test_bisection_and_capacity_rounding():
    assert largest_fitting_rows(lambda rows: rows <= 37, 2, 1000) == 37
    assert largest_fitting_rows(lambda rows: rows <= 2, 2, 3) == 2
    assert stored_transitions(ReplaySizes(8, 8, 1001, 4)) == 1000


@pytest.mark.slow
def test_plan_and_train_size_the_buffer_from_xla_and_refuse_what_cannot_fit(capsys, tmp_path):
    """The CLI end to end on the toy environment; the prediction is checked against XLA's own analysis of the step
    at the chosen size compiled as training compiles it (so that training below reads it from the compile cache)."""
    from rlfit.planning.plan import make_plan
    from rlfit.run.trainer import Trainer
    from rlfit.run.probes import analyze_compiled

    sets = [arg for item in BIG for arg in ("--set", item)]
    base = ["--algo", "sac", "--preset", "smoke", *sets, "--device-memory", "8MiB"]
    assert main(["plan", TOY, *base, "--target", "cpu", "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    chosen = planned["chosen"]
    assert 1000 <= chosen["max_replay_size"] < 1_000_000 and chosen["predicted_bytes"] <= planned["budget_bytes"]
    assert planned["memory_model"]["bytes_per_transition"] == pytest.approx(24, rel=0.05)  # 2 + 1 floats + 12 B
    sizes = ReplaySizes(8, 8, chosen["max_replay_size"], 8)
    trainer = Trainer.build(sac_config(), make_plan(sac_config(), sizes, devices=1))
    measured = analyze_compiled(sac_config(), sizes, trainer.compile_iteration())
    assert chosen["estimate_bytes"] == pytest.approx(measured.total_bytes, rel=0.01)

    run = tmp_path / "run"
    assert main(["train", TOY, *base, "--num-envs", "auto", "--run-dir", str(run), "--quiet"]) == 0
    plan = json.loads((run / "plan.json").read_text())
    assert plan["sizes"]["max_replay_size"] == chosen["max_replay_size"]
    capsys.readouterr()

    impossible = [*base, "--set", "sac.min_replay_size=900000"]
    assert main(["plan", TOY, *impossible, "--target", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlfit: error: no configuration fits the budget of 6.0 MiB") and "\n" not in err
    refused = tmp_path / "refused"
    assert main(["train", TOY, *impossible, "--num-envs", "auto", "--run-dir", str(refused)]) == 2
    err = capsys.readouterr().err.strip().splitlines()  # the planner's progress lines, then the error alone
    assert "sac.min_replay_size=900,000 needs at least that buffer" in err[-1] and err[-1].startswith("rlfit: error")
    assert all(line.startswith("planning: ") for line in err[:-1]) and len(err) > 1
    assert not refused.exists()


def test_the_probes_are_the_configs_sizes_then_two_never_chosen():
    """The config's sizes first (what `choose_buffer` picks when they fit), then twice the environments and twice
    the capacity; a capacity too small for the fewest rows at twice the environments is raised, none the config's."""
    from rlfit.algos.sac.planning import MEMORY_RULES

    config = sac_config()
    assert MEMORY_RULES.measured_sizes(config, 512) == (
        ReplaySizes(8, 8, 1_000_000, 8), ReplaySizes(16, 8, 1_000_000, 8), ReplaySizes(8, 8, 2_000_000, 8))
    small = sac_config("sac.max_replay_size=16", "sac.min_replay_size=16")  # 2 rows of 8; 2 envs x 2 rows x 8 = 32
    assert MEMORY_RULES.measured_sizes(small, None) == (
        ReplaySizes(8, 8, 96, 8), ReplaySizes(16, 8, 32, 8), ReplaySizes(8, 8, 64, 8))


@pytest.mark.slow
def test_auto_with_room_compiles_what_a_plain_train_compiles(tmp_path, run_cli, monkeypatch):
    """`train --algo sac --num-envs auto` where the config's buffer fits: the planner bounds the config's sizes from
    the lowered step, even the bound fits, so it compiles nothing; in a fresh compile cache training compiles each
    of its programs itself, once."""
    monkeypatch.setenv("RLFIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")  # cached however fast it compiled
    done = run_cli("train", TOY, "--algo", "sac", "--preset", "smoke", "--num-envs", "auto", "--set",
                   "run.num_timesteps=1", "--run-dir", str(tmp_path / "run"), "--quiet")
    assert done.returncode == 0, done.stderr[-2000:]
    plan = json.loads((tmp_path / "run" / "plan.json").read_text())
    assert plan["sizes"] == section_sizes(resolve(TOY, "smoke", overrides=["algo=sac"]).sac)._asdict()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert [(p["name"], p["from_cache"]) for p in summary["programs"]] == [
        ("training step", False), ("evaluation", False), ("starting state", False)]  # none compiled by the planner
    model = plan["extra"]["memory_model"]
    assert model["source"] == "lowered" and model["first_is_unlimited_choice"] is True
    assert model["measured_once"] and [p["sizes"] for p in model["points"]] == [plan["sizes"]]
    sizes = plan["sizes"]
    assert model["points"][0]["transitions"] == sizes["max_replay_size"] // sizes["num_envs"] * sizes["num_envs"]
