"""What a trained run leaves, for every algorithm: it records its algorithm (config, plan, policy file, metrics), its
policy acts deterministically through `rlfit.load_policy`, exports to an ONNX model that onnxruntime runs like
`load_policy` (with the algorithm unregistered: export needs only the policy file), and plays a video in native
MuJoCo. One short toy run per algorithm, shared by this module's tests. Covers the test-only detpg too."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

import rlfit
from rlfit.algos.registry import ALGORITHMS, ENVIRONMENT_VARIABLE, register_algorithm, unregister_algorithm
from tests.checkpoints.conftest import TOY
from tests.conftest import cli_in_process
from tests.conformance.conftest import ALGORITHM_NAMES, TEST_ONLY, has_replay
from tests.deploy.play.support import headless_gl_reason, make_policy_run

LAST_TRAIN_ROW = {
    "ppo": {"keys": ("loss/total", "loss/policy", "loss/value", "sps")},
    "sac": {"keys": ("loss/critic", "loss/actor", "loss/alpha", "alpha", "entropy", "replay_size", "updates",
                     "updates_per_s", "sps"),
            "replay_size": 16 + 4 * 16},  # prefill of 16, then 16 policy steps of 4 envs
    # prefill of 40 (10 policy steps of 4), then 16 policy steps; the last iteration's 8 policy steps of 2 critic
    # updates each, the actor after every second one
    "fasttd3": {"keys": ("loss/critic", "loss/actor", "q_mean", "noise_std", "replay_size", "updates",
                         "actor_updates", "sps"),
                "replay_size": 40 + 4 * 16, "updates": 2 * 8, "actor_updates": 8},
    "detpg": {"keys": ("loss/policy",)},
}
"""What each algorithm's last train row of the shared run holds: keys, and exact values where they are known."""


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """`trained(algo)` -> the run directory of `rlfit train` on the toy env, smoke preset, 4 environments (cached)."""
    runs = {}

    def run(algo: str):
        if algo not in runs:
            root = tmp_path_factory.mktemp(f"deploy-{algo}")
            result = cli_in_process(None, "train", *TOY, "--algo", algo, "--num-envs", "4", "--run-dir",
                                    str(root / "run"), "--quiet", cwd=root)
            assert result.returncode == 0, result.stderr
            runs[algo] = root / "run"
        return runs[algo]

    return run


@pytest.mark.parametrize("algo", ALGORITHM_NAMES)
def test_a_run_records_its_algorithm_everywhere_it_is_read_back(trained, algo):
    run = trained(algo)
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["algo"] == algo and config[algo]["num_envs"] == 4
    assert not set(config) & (set(ALGORITHMS) - {algo})  # no other algorithm's section
    assert json.loads((run / "plan.json").read_text())["sizes"]["num_envs"] == 4
    assert json.loads((run / "policy" / "policy.json").read_text())["algorithm"] == algo
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["kind"] == "train"][-1]
    expected = LAST_TRAIN_ROW[algo]
    assert set(expected["keys"]) <= set(train), sorted(train)
    assert {key: train[key] for key in expected if key != "keys"} == {k: v for k, v in expected.items() if k != "keys"}
    if algo == "fasttd3":
        assert 0.001 <= train["noise_std"] <= 0.4


@pytest.mark.parametrize("algo", ALGORITHM_NAMES)
def test_load_policy_acts_deterministically_within_the_action_bounds(trained, algo):
    policy = rlfit.load_policy(trained(algo))
    obs = np.random.default_rng(0).normal(size=(16, 2)).astype(np.float32)
    first, again = np.asarray(policy(obs)), np.asarray(policy(obs))
    np.testing.assert_array_equal(first, again)
    assert first.shape == (16, 1) and np.all(np.abs(first) <= 1.0)


@pytest.mark.parametrize("algo", ALGORITHM_NAMES)
def test_the_onnx_export_acts_like_load_policy_without_the_algorithm_registered(trained, algo, capfd, tmp_path,
                                                                                 monkeypatch):
    onnxruntime = pytest.importorskip("onnxruntime", reason="needs the export extra: pip install 'rlfit[export]'")
    run, out = trained(algo), tmp_path / f"{algo}.onnx"
    monkeypatch.delenv(ENVIRONMENT_VARIABLE, raising=False)
    for name in TEST_ONLY:
        unregister_algorithm(name)
    try:
        exported = cli_in_process(capfd, "export", str(run), "--format", "onnx", "--out", str(out), cwd=tmp_path)
    finally:
        for name, package in TEST_ONLY.items():
            register_algorithm(name, package)
    assert exported.returncode == 0, exported.stderr
    assert float(exported.stdout.split("within ")[1].split(" ")[0]) <= 1e-5  # checked against load_policy
    session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    obs = np.random.default_rng(1).normal(scale=2.0, size=(128, 2)).astype(np.float32)
    (actions,) = session.run(["action"], {"obs": obs})
    assert actions.shape == (128, 1)
    np.testing.assert_allclose(actions, np.asarray(rlfit.load_policy(run)(obs)), atol=1e-5)


@pytest.fixture(scope="module")
def gl_reason() -> str | None:
    """Why videos cannot be rendered here (None when they can): probed once, in a fresh Python, for the module."""
    return headless_gl_reason()


@pytest.mark.slow
@pytest.mark.parametrize("algo", ALGORITHM_NAMES)
def test_it_plays_a_video_in_native_mujoco(tmp_path, capfd, gl_reason, algo):
    """The policy file of an untrained CartpoleBalance run (`make_policy_run`: what training writes, no training),
    its parameters drawn in the algorithm's policy's shapes from the learner's traced initial state (`traced`:
    nothing of the learner compiled or run; play reads the policy file alone), without a replay prefill to trace."""
    if gl_reason:
        pytest.skip(gl_reason)
    import imageio.v3 as iio

    no_prefill = [f"{algo}.min_replay_size=0"] if has_replay(algo) else []
    run_dir = make_policy_run(tmp_path / "run", "CartpoleBalance", [f"algo={algo}", *no_prefill], traced=True)
    out = tmp_path / f"{algo}.gif"
    result = cli_in_process(capfd, "play", str(run_dir), "--seconds", "0.3", "--out", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "played 0.30 s of CartpoleBalance" in result.stdout
    frames = iio.imread(out, index=None)
    assert frames.shape[0] >= 2 and not np.array_equal(frames[0], frames[-1])
