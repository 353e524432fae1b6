"""Same seed, same run (metrics and params_digest); another seed, other parameters."""

from __future__ import annotations

import json
import math

import pytest

NOT_WALL_CLOCK = ("iteration_s", "sps", "wall_s", "time", "updates_per_s")


def deterministic_rows(result):
    rows = [json.loads(line) for line in result.run_dir.metrics.read_text().splitlines()]
    return [{k: v for k, v in row.items() if k not in NOT_WALL_CLOCK} for row in rows]


def test_same_seed_gives_the_same_metrics_and_digest(toy_run):
    first, again = toy_run(0), toy_run(0, tag="-again")
    assert first.run_dir.path != again.run_dir.path
    rows_a, rows_b = deterministic_rows(first), deterministic_rows(again)
    assert any("loss/total" in row for row in rows_a)
    assert rows_a == rows_b  # every loss term, grad norm, episode statistic and eval reward, exactly
    assert first.summary["params_digest"] == again.summary["params_digest"]
    assert first.summary["final_eval_reward"] == again.summary["final_eval_reward"]


def test_different_seed_gives_a_different_digest(toy_run):
    first, other = toy_run(0), toy_run(1)
    assert first.summary["params_digest"] != other.summary["params_digest"]
    losses = [row["loss/total"] for row in deterministic_rows(first) if "loss/total" in row]
    other_losses = [row["loss/total"] for row in deterministic_rows(other) if "loss/total" in row]
    assert losses != other_losses


@pytest.mark.slow
def test_cartpole_smoke_runs_repeat_exactly(tmp_path):
    """A real Playground environment (MJX physics, impl jax on CPU): one smoke iteration twice, same digest."""
    import rlfit

    first = rlfit.train("CartpoleBalance", preset="smoke", run_dir=tmp_path / "a")
    again = rlfit.train("CartpoleBalance", preset="smoke", run_dir=tmp_path / "b")
    assert first.summary["impl"] == "jax"
    assert first.summary["params_digest"] == again.summary["params_digest"]
    assert deterministic_rows(first) == deterministic_rows(again)
    assert first.summary["final_eval_reward"] is not None
    assert math.isfinite(first.summary["final_eval_reward"])
