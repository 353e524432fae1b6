"""Bad input, for every algorithm: a setting of another algorithm, a preset the algorithm lacks, or a value its rules
refuse is one line on stderr, exit 2, no traceback, and nothing written. Covers the test-only detpg (its own rules
in tests/algos/detpg/config.py); the algorithm-specific rules are listed case by case in REFUSED."""

from __future__ import annotations

import pytest

from rlfit.algos.registry import ALGORITHMS
from tests.conftest import TOY_ENV, cli_in_process
from tests.conformance.conftest import ALGORITHM_NAMES

REFUSED = [
    (["--set", "fasttd3.n_step=5"], "fasttd3.n_step is a setting of algo fasttd3, but this run's algo is ppo"),
    (["--set", "sac.batch_size=5"], "sac.batch_size is a setting of algo sac, but this run's algo is ppo"),
    (["--set", "algo=dqn"], "unknown algo 'dqn'"),
    (["--algo", "sac", "--set", "sac.max_replay_size=8"], "sac.max_replay_size 8 holds fewer than 2 policy steps"),
    (["--algo", "fasttd3", "--set", "fasttd3.v_min=50"], "fasttd3.v_min 50.0 must be below fasttd3.v_max 10.0"),
    (["--algo", "fasttd3", "--set", "fasttd3.max_replay_size=32"], "holds fewer than n_step + 2 = 5 policy steps"),
    (["--algo", "fasttd3", "--set", "fasttd3.std_max=0.0001"], "fasttd3.std_max 0.0001 is below fasttd3.std_min"),
    (["--algo", "fasttd3", "--set", "run.precision=fp16"], "algo: fasttd3 trains in fp32 or bf16"),
    (["--algo", "fasttd3", "--preset", "pixels"], "unknown preset 'pixels' for algo fasttd3 (it is a preset of algo sac)"),
    (["--algo", "detpg", "--set", "detpg.learning_rate=0"], "detpg.learning_rate must be positive, got 0"),
]
"""(arguments after `rlfit train TOY --preset smoke`, a fragment of the one line): each algorithm's own rules."""
for _algo in ALGORITHM_NAMES:
    _other = next(name for name in ALGORITHM_NAMES if name != _algo)
    REFUSED.append((["--algo", _algo, "--set", f"{_other}.num_envs=8"],
                    f"{_other}.num_envs is a setting of algo {_other}, but this run's algo is {_algo}"))
    REFUSED.append((["--algo", _algo, "--preset", "nosuch"], f"unknown preset 'nosuch' for algo {_algo}"))
REFUSED.append((["--algo", "sac", "--preset", "g1"], "unknown preset 'g1' for algo sac (it is a preset of algo ppo"))


@pytest.mark.parametrize(("args", "fragment"), REFUSED, ids=[" ".join(args) for args, _ in REFUSED])
def test_a_refusal_is_one_line_exit_2_and_writes_nothing(capfd, tmp_path, args, fragment):
    assert set(ALGORITHM_NAMES) >= set(ALGORITHMS)
    result = cli_in_process(capfd, "train", TOY_ENV, "--preset", "smoke", *args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and fragment in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []
