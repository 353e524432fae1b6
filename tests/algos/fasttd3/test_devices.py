"""FastTD3 on 2 CPU devices (forced by XLA_FLAGS in a child interpreter, as tests/test_mesh.py does): the replay
buffer and the per-environment noise stds are split by environment, and the parameters end where one device's
do, up to the order of sums (tests/test_mesh.py's TOLERANCE and its reasoning)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import FAST_COMPILE_FLAGS, cli_environment

TOLERANCE = 1e-5
WORKER = """
from rlfit.cli.gc_thresholds import collect_less_often
collect_less_often()  # as an `rlfit` process
import json, sys
import jax, numpy as np
import rlfit
overrides = ["algo=fasttd3", "fasttd3.num_envs=16", "fasttd3.batch_size=32", "fasttd3.min_replay_size=96",
             "fasttd3.max_replay_size=4096", "env.episode_length=50", "run.num_timesteps=640", "run.eval_every=0"]
out = {}
for devices in (1, 2):
    result = rlfit.train("tests.toy_env:make", "smoke", overrides=[*overrides, f"run.devices={devices}"],
                         run_dir=f"{sys.argv[1]}/run{devices}", quiet=True)
    leaves = jax.tree.leaves(jax.device_get(result.state.params))
    out[devices] = {"params": [np.asarray(x).ravel().tolist() for x in leaves],
                    "reward_spec": [str(p) for p in getattr(result.state.replay.reward.sharding, "spec", ())],
                    "reward_shard": list(result.state.replay.reward.addressable_shards[0].data.shape),
                    "noise_shard": list(result.state.noise_std.addressable_shards[0].data.shape),
                    "iterations": result.summary["iterations"]}
print(json.dumps(out))
"""


def test_two_devices_split_the_buffer_by_environment_and_learn_what_one_learns(tmp_path):
    env = {**cli_environment(), "XLA_FLAGS": f"--xla_force_host_platform_device_count=2 {FAST_COMPILE_FLAGS}"}
    done = subprocess.run([sys.executable, "-c", WORKER, str(tmp_path)], env=env, capture_output=True, text=True,
                          timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = json.loads(done.stdout.strip().splitlines()[-1])
    one, two = runs["1"], runs["2"]
    assert one["iterations"] == two["iterations"] == 5  # 640 steps of 16 envs x 8 policy steps
    assert two["reward_spec"] == ["None", "envs"] and two["reward_shard"][1] == 8  # 8 of 16 environments each
    assert two["noise_shard"] == [8]
    largest = max(max(abs(a - b) for a, b in zip(x, y)) for x, y in zip(one["params"], two["params"]))
    assert largest < TOLERANCE
