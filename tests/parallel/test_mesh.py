"""Training split over several devices of one process (`rlfit.parallel.mesh`), on CPU devices forced by XLA_FLAGS.

A test process has one CPU device and cannot change that once JAX has started, so the multi-device runs happen
in tests/multi_device_worker.py (one interpreter with 4 devices, shared by the tests here) and these tests
check what it wrote. The reference for a run on 2 or 4 devices is the same config (same global sizes, same
seed) on 1 device: JAX's partitionable threefry draws the same random numbers however an array is split, so
the only difference left is the order in which a sum over environments is added up (partial sums per device,
then across devices). That changes a float32 result by a few units in the last place (about 1e-7 relative), and
Adam turns such differences into parameter differences of the same order over a few iterations: at most 3.6e-7
was measured here after 5 iterations (80 updates), on 2 or 4 devices. TOLERANCE is 1e-5, about 30 times that;
a real fault is far larger: an update computed from one device's half of the batch, or with unreduced
gradients, moves parameters by about the learning rate (1e-3) per update.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from rlfit.errors import UserError
from rlfit.parallel.mesh import check_divisible, device_count, parse_devices
from tests.conftest import FAST_COMPILE_FLAGS, REPO_ROOT, cli_environment

TOLERANCE = 1e-5
FOUR_DEVICES = {"XLA_FLAGS": f"--xla_force_host_platform_device_count=4 {FAST_COMPILE_FLAGS}"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """What the worker wrote: name -> (parameter leaves, record with the summary and the shardings)."""
    out = tmp_path_factory.mktemp("multi-device")
    done = subprocess.run([sys.executable, str(REPO_ROOT / "tests" / "multi_device_worker.py"), str(out)],
                          env={**cli_environment(), **FOUR_DEVICES}, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]

    def load(name: str):
        if name in ("step_bytes", "refused"):
            return json.loads((out / f"{name}.json").read_text())
        if name.endswith("-models"):
            return dict(np.load(out / f"{name}.npz"))
        arrays = np.load(out / f"{name}.npz")
        return [arrays[key] for key in arrays.files], json.loads((out / f"{name}.json").read_text())

    load.out = out
    return load


def largest_difference(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    assert len(a) == len(b) and all(x.shape == y.shape for x, y in zip(a, b))
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))


@pytest.mark.parametrize("devices", [2, 4])
def test_ppo_on_several_devices_learns_what_one_device_learns(runs, devices):
    one, one_record = runs("ppo-1")
    split, record = runs(f"ppo-{devices}")
    assert record["env_state_spec"] == ["envs"] and record["env_state_devices"] == devices  # really split
    assert record["summary"]["devices"]["devices"] == devices and one_record["summary"]["devices"]["devices"] == 1
    assert record["summary"]["iterations"] == one_record["summary"]["iterations"] == 5
    assert largest_difference(one, split) < TOLERANCE
    assert record["summary"]["final_eval_reward"] == pytest.approx(one_record["summary"]["final_eval_reward"],
                                                                   rel=1e-4)


def test_sac_splits_its_replay_buffer_by_environment_and_learns_what_one_device_learns(runs):
    one, one_record = runs("sac-1")
    split, record = runs("sac-2")
    assert record["env_state_spec"] == ["envs"] and record["env_state_devices"] == 2
    # [rows, num_envs] split along environments: each device stores its 8 environments' transitions
    assert record["replay_reward_spec"] == ["None", "envs"] and record["replay_reward_shard_shape"][1] == 8
    assert largest_difference(one, split) < TOLERANCE


def test_sac_from_pixels_trains_on_two_devices_with_its_uint8_frames_split_by_environment(runs):
    _, record = runs("sac-pixels-2")
    assert record["summary"]["devices"]["devices"] == 2 and record["summary"]["iterations"] >= 1
    assert record["env_state_spec"] == ["envs"] and record["env_state_devices"] == 2
    assert record["replay_obs_dtype"] == "uint8" and record["replay_obs_spec"][:2] == ["None", "envs"]
    assert record["replay_obs_shard_shape"][1] * 2 == record["replay_obs_shape"][1]  # half the environments each
    assert record["summary"]["final_eval_reward"] is not None


@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_each_device_holds_and_computes_its_share_not_everything(runs, algo):
    """XLA's analysis of the compiled step and evaluation: on 2 devices each holds about half the temporaries
    (the rollout, the minibatches, the sampled batches, the evaluation's episodes) and SAC about half its state
    (the replay buffer dominates it; the toy environment's own state is small beside PPO's replicated
    parameters), not a full copy."""
    one, two = (runs("step_bytes")[algo][key] for key in ("1", "2"))
    assert two["temp"] < 0.6 * one["temp"]
    assert two["eval_temp"] < 0.6 * one["eval_temp"]  # the evaluation's environments are split too
    if algo == "sac":
        assert two["arguments"] < 0.6 * one["arguments"]


def test_randomized_models_are_split_over_the_devices_and_drawn_as_on_one_device(runs):
    """With `env.randomization` (the weighted toy of tests/toy_env.py: each environment's mass and damping scale its
    moves), each device holds the models of its own environments (the batch split along environments, half the rows
    each), the batch is the one a single device draws, and the run learns what the single-device run learns: within
    TOLERANCE (measured: 1.2e-7 after 2 iterations); an update from one device's half of the batch moves parameters
    by about the learning rate (1e-3) per update."""
    one, one_record = runs("ppo-randomized-1")
    split, record = runs("ppo-randomized-2")
    assert record["env_state_spec"] == ["envs"] and record["env_state_devices"] == 2
    assert record["summary"]["randomization"] == one_record["summary"]["randomization"]
    assert record["summary"]["iterations"] == one_record["summary"]["iterations"] >= 1
    models_one, models_two = (runs(f"ppo-randomized-{n}-models") for n in (1, 2))
    assert sorted(models_one) == sorted(models_two) == ["body_mass", "dof_damping"]
    for field, values in models_one.items():
        assert np.array_equal(values, models_two[field])
        assert len(np.unique(values, axis=0)) == len(values)  # every environment its own model
    shards = json.loads((runs.out / "ppo-randomized-2-models.json").read_text())
    for field, values in models_one.items():
        assert shards[field]["spec"][0] == "envs" and shards[field]["shard_rows"] * 2 == len(values)
    assert largest_difference(one, split) < TOLERANCE


def test_a_run_resumes_on_another_number_of_devices_and_continues_correctly(runs):
    straight, straight_record = runs("ppo-1")
    resumed, record = runs("ppo-1-2-1")  # 2 iterations on 1 device, 2 on 2 devices, 1 on 1 device
    assert record["summary"]["iterations"] == 5 and record["summary"]["devices"]["devices"] == 1
    assert largest_difference(straight, resumed) < TOLERANCE


def test_a_run_resumed_on_the_same_devices_is_bit_identical(runs):
    straight, straight_record = runs("ppo-2")
    resumed, record = runs("ppo-2-2")
    assert record["summary"]["params_digest"] == straight_record["summary"]["params_digest"]
    assert largest_difference(straight, resumed) == 0.0


def test_num_envs_that_does_not_split_over_the_devices_is_refused_with_the_nearest_values(runs):
    """`rlfit train ... --set ppo.num_envs=32 --set run.devices=3`, run by the CLI's main in the worker (which sees 4
    devices)."""
    done = runs("refused")
    assert done["returncode"] == 2
    assert done["stderr"].strip().splitlines() == [
        "rlfit: error: ppo.num_envs=32 does not split over 3 devices (it is the total over all of them); "
        "use ppo.num_envs=24 or 48 or run.devices=2"]
    assert not (runs.out / "refused").exists()


def test_run_devices_is_auto_or_a_positive_count():
    assert parse_devices("auto") is None and parse_devices("2") == 2 and parse_devices(" AUTO ") is None
    for bad in ("0", "-1", "two", "1.5", ""):
        with pytest.raises(UserError, match="run.devices must be auto or a positive number of devices"):
            parse_devices(bad)


def test_device_count_uses_every_device_for_auto_and_refuses_more_than_there_are():
    assert device_count("auto", 8, "gpu") == 8
    assert device_count("3", 8, "gpu") == 3
    with pytest.raises(UserError, match="run.devices=2 but this process sees 1 cpu device; set run.devices to auto "
                                        "or at most 1"):
        device_count("2", 1, "cpu")


def test_the_divisibility_message_names_the_nearest_valid_totals_and_device_counts():
    check_divisible(8, 1, "ppo.num_envs")
    check_divisible(8, 4, "ppo.num_envs")
    with pytest.raises(UserError) as refused:
        check_divisible(30, 4, "sac.num_envs")
    assert str(refused.value).endswith("use sac.num_envs=28 or 32 or run.devices=3")
    with pytest.raises(UserError) as refused:  # only powers of two pass the other rules
        check_divisible(24, 16, "ppo.num_envs", valid=lambda n: n & (n - 1) == 0)
    assert str(refused.value).endswith("use ppo.num_envs=16 or 32 or run.devices=12")
    with pytest.raises(UserError) as refused:
        check_divisible(3, 4, "ppo.num_envs")
    assert str(refused.value).endswith("use ppo.num_envs=4 or run.devices=3")

