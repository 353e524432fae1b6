"""The types of the algorithm contract check something: mypy (with the project's settings) sees a built-in
algorithm's own state through the registry, sees only the contract's `TrainState` where the algorithm is named at
run time (and rejects reaching past it), and rejects a state of one algorithm given to another's step."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SNIPPET = '''from rlfit.algos.contract import TrainState
from rlfit.algos.registry import algorithm
from rlfit.algos.sac.step import SACState
from rlfit.run.trainer import Trainer


def built_in(trainer: Trainer[TrainState]) -> None:
    reveal_type(algorithm("sac").build(trainer.config, trainer.plan, trainer.train_env, trainer.obs_example).init)
    reveal_type(algorithm("ppo").sizes_type)


def named_at_run_time(name: str, trainer: Trainer[TrainState], state: TrainState, sac: SACState) -> None:
    reveal_type(algorithm(name).sizes_type)
    reveal_type(trainer.learner.step(state))
    state.params.policy
    algorithm("ppo").build(trainer.config, trainer.plan, trainer.train_env, trainer.obs_example).step(sac)
'''


def test_mypy_keeps_each_algorithm_s_state_and_erases_a_run_time_name_s_to_the_contract(tmp_path):
    api = pytest.importorskip("mypy.api")
    snippet = tmp_path / "uses_the_contract.py"
    snippet.write_text(SNIPPET)
    out, _, _ = api.run(["--config-file", str(REPO / "pyproject.toml"), str(snippet)])
    said = defaultdict(str)
    for line, message in re.findall(r"uses_the_contract\.py:(\d+): \w+: (.*)", out):
        said[int(line)] += message
    # a NamedTuple reveals as its fields, then the class it is
    assert said[8].startswith('Revealed type is "def (int) -> ') and said[8].endswith('fallback=rlfit.algos.sac.step.SACState]"')
    assert 'Revealed type is "type[tuple[int, int, int, int, fallback=rlfit.algos.ppo.sizes.BatchSizes]]"' in said[9]
    assert 'Revealed type is "type[rlfit.algos.contract.Sizes]"' in said[13]
    assert 'Revealed type is "tuple[rlfit.algos.contract.TrainState, rlfit.algos.contract.StepMetrics]"' in said[14]
    assert 'has no attribute "policy"' in said[15]
    assert 'incompatible type "SACState"; expected "TrainState"' in said[16]
    assert set(said) == {8, 9, 13, 14, 15, 16}, out
