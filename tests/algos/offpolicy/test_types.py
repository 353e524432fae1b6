"""SAC's and FastTD3's config sections and states have every field the shared off-policy parts read (the two
Protocols of rlfit.algos.offpolicy.types), and the plan's sizes replace a section's the same way for both."""

from __future__ import annotations

import dataclasses

import pytest

from rlfit.algos.fasttd3.config import FastTD3Config
from rlfit.algos.fasttd3.step import FastTD3State
from rlfit.algos.offpolicy.learner import sized_config
from rlfit.algos.offpolicy.sizes import ReplaySizes
from rlfit.algos.offpolicy.types import OffPolicyState, ReplaySettings
from rlfit.algos.sac.config import SACConfig
from rlfit.algos.sac.step import SACState


def protocol_fields(protocol: type) -> set[str]:
    return {name for name, value in vars(protocol).items() if isinstance(value, property)}


@pytest.mark.parametrize("section", [SACConfig, FastTD3Config])
def test_each_config_section_has_the_replay_settings(section):
    fields = {field.name for field in dataclasses.fields(section)}
    assert protocol_fields(ReplaySettings) == {"num_envs", "batch_size", "min_replay_size", "max_replay_size",
                                               "policy_steps_per_iteration", "normalize_observations"}
    assert protocol_fields(ReplaySettings) <= fields


@pytest.mark.parametrize("state", [SACState, FastTD3State])
def test_each_state_has_the_collecting_fields(state):
    assert protocol_fields(OffPolicyState) == {"normalizer", "env_state", "replay", "key", "policy_steps"}
    assert protocol_fields(OffPolicyState) <= set(state._fields)


@pytest.mark.parametrize("section", [SACConfig(min_replay_size=5000), FastTD3Config(min_replay_size=5000)])
def test_the_plan_sizes_a_section_and_the_prefill_fits_the_buffer(section):
    sized = sized_config(section, ReplaySizes(num_envs=16, batch_size=64, max_replay_size=4096,
                                              policy_steps_per_iteration=section.policy_steps_per_iteration))
    assert type(sized) is type(section)
    assert (sized.num_envs, sized.batch_size, sized.max_replay_size, sized.min_replay_size) == (16, 64, 4096, 4096)
    assert dataclasses.replace(sized, num_envs=section.num_envs, batch_size=section.batch_size,
                               max_replay_size=section.max_replay_size, min_replay_size=5000) == section
