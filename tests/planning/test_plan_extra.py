"""plan.json's `extra` is a `PlanExtra`: the planner's figures as the record's fields in order (a key only where it
has a value), read back unchanged, and a seed group's record added after them."""

from __future__ import annotations

import dataclasses
import json

from rlfit.config.schema import resolve
from rlfit.hardware.jax_setup import configure_jax
from rlfit.planning.plan import PlanExtra, make_plan
from rlfit.planning.device_plan import plan_for
from rlfit.run.probes import StepProbes
from rlfit.run.loop import lane_plan as group_plan
from tests.conftest import TOY_ENV


def test_the_planner_s_extra_has_the_record_s_fields_and_round_trips():
    configure_jax("fp32")
    _, plan, _ = plan_for(resolve(TOY_ENV, "smoke"), StepProbes(), device_memory="4MiB", auto_num_envs=True)
    written = json.loads(json.dumps(plan.to_dict()))["extra"]
    assert list(written) == ["budget_bytes", "margin", "memory_model"]
    assert plan.figures.budget_bytes == written["budget_bytes"] == int(4 * 2**20 * 0.75)
    assert plan.figures.memory_model is not None and plan.figures.memory_model["points"]
    assert PlanExtra.from_json(written).to_json() == written
    grouped = group_plan(plan, {"seeds": [0, 1]}).extra
    assert list(grouped) == ["budget_bytes", "margin", "memory_model", "seed_group"]
    assert grouped["seed_group"] == {"seeds": [0, 1]}


def test_a_plan_without_the_planner_writes_an_empty_extra_and_a_group_only_its_record():
    plan = make_plan(resolve(TOY_ENV, "smoke"))
    assert plan.extra == {} and plan.figures == PlanExtra()
    assert group_plan(plan, {"seeds": [2]}).to_dict()["extra"] == {"seed_group": {"seeds": [2]}}
    assert [field.name for field in dataclasses.fields(PlanExtra)] == ["budget_bytes", "margin", "memory_model",
                                                                       "seed_group"]
