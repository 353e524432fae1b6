"""TensorBoard events read back with TensorBoard's own reader: live rows, and a rebuild from metrics.jsonl."""

from __future__ import annotations

import json

import pytest

from rlfit.sinks.tensorboard import TensorBoardSink

pytest.importorskip("tensorboard")


def read_scalars(directory) -> dict[str, dict[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(directory), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {tag: {e.step: e.value for e in accumulator.Scalars(tag)} for tag in accumulator.Tags()["scalars"]}


def train_row(iteration: int) -> dict:
    return {"kind": "train", "iteration": iteration, "env_steps": 100 * iteration, "sps": 1000.0 + iteration,
            "loss/total": 0.5 / iteration, "wall_s": 1.0 * iteration, "time": 1_700_000_000.0 + iteration,
            "episodes": 3, "flag": True}


def test_rows_are_readable_at_once_without_closing(tmp_path):
    sink = TensorBoardSink(tmp_path / "tb", tmp_path / "metrics.jsonl")
    for iteration in (1, 2):
        sink.write("train", train_row(iteration))
    scalars = read_scalars(tmp_path / "tb")  # the writer is still open: flushed per row
    assert scalars["train/sps"] == {100: 1001.0, 200: 1002.0}
    assert scalars["loss/total"] == {100: 0.5, 200: 0.25}
    assert "train/iteration" not in scalars and "train/time" not in scalars and "train/flag" not in scalars
    sink.close()


def test_opening_an_existing_run_rebuilds_exactly_the_metrics_rows(tmp_path):
    metrics, tb = tmp_path / "metrics.jsonl", tmp_path / "tb"
    sink = TensorBoardSink(tb, metrics)
    for iteration in range(1, 6):  # events for iterations 1..5, but metrics.jsonl (the record) holds 1..3
        sink.write("train", train_row(iteration))
    sink.close()
    eval_row = {"kind": "eval", "iteration": 3, "env_steps": 300, "eval/episode_reward": 7.0}
    metrics.write_text("".join(json.dumps(r) + "\n" for r in [train_row(1), train_row(2), train_row(3), eval_row]))

    reopened = TensorBoardSink(tb, metrics)
    scalars = read_scalars(tb)
    assert scalars["train/sps"] == {100: 1001.0, 200: 1002.0, 300: 1003.0}
    assert scalars["eval/episode_reward"] == {300: 7.0}

    reopened.write("train", train_row(4))
    reopened.rewind(3)  # an out-of-memory back-off falls back to iteration 3
    assert sorted(read_scalars(tb)["train/sps"]) == [100, 200, 300]
    reopened.close()
    assert not list(tmp_path.glob(".tb*"))  # the staging folders are gone
