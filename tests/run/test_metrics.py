"""The run directory of a short toy run: honest sps, cumulative env steps, summary, eval cadence, tb/, config.yaml."""

from __future__ import annotations

import hashlib
import json
import math
import struct

import jax
import numpy as np
import pytest
import yaml

from rlfit.config.schema import from_layers, resolve

# from TOY_TRAIN_OVERRIDES: batch_size * num_minibatches * unroll_length * action_repeat
STEPS_PER_ITERATION = 32 * 4 * 10 * 2
NUM_ITERATIONS = math.ceil(80_000 / STEPS_PER_ITERATION)  # 32
EVAL_EVERY = 5


@pytest.fixture(scope="module")
def run(toy_run):
    return toy_run(0)


@pytest.fixture(scope="module")
def rows(run):
    lines = run.run_dir.metrics.read_text().splitlines()
    return [json.loads(line) for line in lines]


def train_rows(rows):
    return [r for r in rows if r["kind"] == "train"]


def eval_rows(rows):
    return [r for r in rows if r["kind"] == "eval"]


def test_one_train_row_per_iteration_with_cumulative_env_steps(rows):
    train = train_rows(rows)
    assert [r["iteration"] for r in train] == list(range(1, NUM_ITERATIONS + 1))
    assert [r["env_steps"] for r in train] == [i * STEPS_PER_ITERATION for i in range(1, NUM_ITERATIONS + 1)]
    for key in ("iteration_s", "sps", "wall_s", "loss/total", "loss/policy", "loss/value", "loss/entropy", "grad_norm"):
        assert all(key in r for r in train), key
    assert any("episode/return" in r and "episode/length" in r for r in train)
    walls = [r["wall_s"] for r in train]
    assert walls == sorted(walls)


class FakeClock:
    """`time.perf_counter` for the runner: each reading is TICK seconds after the one before."""

    TICK = 0.25

    def __init__(self):
        self.now = 100.0

    def perf_counter(self) -> float:
        self.now += self.TICK
        return self.now


class StepsAtEachRow:
    """A sink noting, at each train row, how many environment steps `tests.toy_env.STEPS_TAKEN` has counted."""

    def __init__(self):
        self.rows: list[tuple[dict, int]] = []

    def write(self, kind, row):
        from tests.toy_env import STEPS_TAKEN

        if kind == "train":
            jax.effects_barrier()  # every callback of the iteration has run
            self.rows.append((row, STEPS_TAKEN["count"]))

    def close(self):
        pass


def test_sps_is_the_env_steps_counted_in_the_iteration_over_its_time(tmp_path, monkeypatch):
    """Env steps counted by the environment itself (a host callback in each step) and time from a fake clock,
    against the runner's `sps`, `iteration_s` and `env_steps`."""
    import types

    import rlfit
    import rlfit.run.loop
    import rlfit.run.lanes
    from tests.toy_env import STEPS_TAKEN

    clock, counter = FakeClock(), StepsAtEachRow()
    monkeypatch.setattr(rlfit.run.loop, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    open_sinks = rlfit.run.lanes.open_sinks
    monkeypatch.setattr(rlfit.run.lanes, "open_sinks", lambda *args, **kwargs: rlfit.run.lanes.Sinks(
        open_sinks(*args, **kwargs).sinks + [counter]))
    STEPS_TAKEN["count"] = 0
    rlfit.train("tests.toy_env:make_counting", "smoke", overrides=["env.action_repeat=2", "run.num_timesteps=300",
                                                                   "run.eval_every=0"], run_dir=tmp_path / "run")
    assert len(counter.rows) == 3  # 64 policy steps x 2 env steps per iteration: 300 rounds up to 3 iterations
    before = 0
    for row, counted in counter.rows:
        steps = counted - before
        assert steps == 8 * 2 * 4 * 2  # batch_size * num_minibatches * unroll_length (smoke) * action_repeat
        assert row["iteration_s"] == FakeClock.TICK
        assert row["sps"] == steps / FakeClock.TICK and row["env_steps"] == counted
        before = counted


def test_eval_rows_every_eval_every_iterations_and_at_the_end(rows):
    evals = eval_rows(rows)
    expected = list(range(EVAL_EVERY, NUM_ITERATIONS + 1, EVAL_EVERY)) + [NUM_ITERATIONS]
    assert NUM_ITERATIONS % EVAL_EVERY != 0, "the last iteration must be off the cadence for this check"
    assert [r["iteration"] for r in evals] == expected
    for row in evals:
        assert row["env_steps"] == row["iteration"] * STEPS_PER_ITERATION
        assert math.isfinite(row["eval/episode_reward"])


def test_summary(run, rows):
    summary = json.loads(run.run_dir.summary.read_text())
    assert summary == json.loads(json.dumps(run.summary, default=str))  # the file is what the API returned
    assert summary["final_eval_reward"] == eval_rows(rows)[-1]["eval/episode_reward"]
    assert summary["env_steps"] == NUM_ITERATIONS * STEPS_PER_ITERATION
    assert summary["session_env_steps"] == summary["env_steps"]  # a fresh run: the whole run is this session
    assert summary["train_wall_s"] > 0 and summary["compile_s"] > 0 and not summary["compile_reused"]
    assert summary["sps_mean"] == pytest.approx(summary["session_env_steps"] / summary["train_wall_s"], rel=1e-9)
    # train_wall_s covers every iteration (and evaluation) after compilation
    assert sum(r["iteration_s"] for r in train_rows(rows)) <= summary["train_wall_s"]
    assert train_rows(rows)[-1]["wall_s"] <= summary["train_wall_s"]
    assert summary["device"].startswith(jax.devices()[0].platform)
    assert summary["versions"]["jax"] == jax.__version__
    assert {"rlfit", "mujoco", "optax", "flax"} <= set(summary["versions"])
    stats = jax.devices()[0].memory_stats()
    if stats is None:  # the CPU keeps no allocator statistics
        assert summary["device_peak_bytes"] is None
    else:
        assert 0 < summary["device_peak_bytes"] <= stats["peak_bytes_in_use"]
    assert summary["predicted_bytes"] is None  # sizes from the config, no --device-memory: nothing predicted


def test_params_digest_is_sha256_of_the_final_parameters(run):
    """Recomputed from what the final checkpoint holds on disk (not from the state in memory)."""
    from rlfit.checkpoints.format import list_steps, load_checkpoint

    checkpoints = run.run_dir.checkpoints
    like = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), run.state)  # the structure only
    saved, _ = load_checkpoint(checkpoints, list_steps(checkpoints)[-1], like)
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(saved.params):
        digest.update(np.asarray(leaf).tobytes())
    assert run.summary["params_digest"] == digest.hexdigest()
    assert list_steps(checkpoints)[-1] == run.summary["iterations"]


def read_scalar_tags(path):
    """Tags of scalar summaries in a TFRecord event file (length, crc, payload, crc per record)."""
    from tensorboardX.proto import event_pb2

    tags = set()
    data = path.read_bytes()
    offset = 0
    while offset < len(data):
        (length,) = struct.unpack("<Q", data[offset:offset + 8])
        payload = data[offset + 12:offset + 12 + length]
        offset += 12 + length + 4
        event = event_pb2.Event.FromString(payload)
        tags.update(value.tag for value in event.summary.value)
    return tags


def test_tensorboard_event_file(run):
    files = list(run.run_dir.tensorboard.glob("events.out.tfevents.*"))
    assert files, "tb/ has no event file"
    tags = set().union(*(read_scalar_tags(f) for f in files))
    assert {"loss/total", "eval/episode_reward"} <= tags
    assert any("sps" in tag for tag in tags)


def test_config_yaml_round_trips_to_the_same_config(run, toy_env_name, toy_train_overrides):
    saved = yaml.safe_load(run.run_dir.config.read_text())
    expected = resolve(toy_env_name, "smoke", None, [*toy_train_overrides, "run.seed=0"])
    assert from_layers([saved]) == expected
    assert saved == expected.to_dict()
    plan = json.loads(run.run_dir.plan.read_text())
    assert plan["env_steps_per_iteration"] == STEPS_PER_ITERATION
    assert plan["num_iterations"] == NUM_ITERATIONS
