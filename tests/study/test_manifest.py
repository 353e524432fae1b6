"""The manifest: parsed and validated whole before anything runs; a bad one is one line and exit code 2."""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml

from rlfit.config.schema import parse_override
from rlfit.errors import UserError
from rlfit.study.experiment import check_ratios, measure_names
from rlfit.study.manifest import Trial, override_strings, parse_manifest

BASE = {
    "name": "study", "env": "CartpoleBalance", "preset": "quick", "set": {"run.eval_every": 5},
    "variants": [{"name": "a", "set": {"ppo.learning_rate": 1e-3}}, {"name": "b", "set": {"ppo.learning_rate": 3e-4}}],
    "seeds": 3,
    "suites": {"shifted": {"set": {"env.overrides": {"ctrl_dt": 0.02}}, "episodes": 8}},
    "stages": {"gpu-test": {"set": {"run.num_timesteps": 1000, "run.eval_every": 1}, "seeds": 2, "episodes": 2},
               "full": {}},
}


def test_a_manifest_with_its_stage_and_command_line():
    manifest = parse_manifest(BASE, "gpu-test", ["run.eval_every=2"])
    assert manifest.stage == "gpu-test" and manifest.seeds == (0, 1)
    assert manifest.overrides == {"run.eval_every": 2, "run.num_timesteps": 1000}  # base < stage < command line
    assert manifest.suites[0].episodes == 2 and manifest.suites[0].overrides == {"env.overrides": {"ctrl_dt": 0.02}}
    assert [t.path for t in manifest.trials()] == ["a/seed-0", "a/seed-1", "b/seed-0", "b/seed-1"]
    overrides = dict(parse_override(item) for item in manifest.trial_overrides(Trial("b", 1)))
    assert overrides == {"run.eval_every": 2, "run.num_timesteps": 1000, "ppo.learning_rate": 3e-4, "run.seed": 1,
                         "run.wandb_group": "study"}


def test_the_default_stage_is_full_and_seeds_may_be_a_list():
    manifest = parse_manifest({**BASE, "seeds": [4, 9]})
    assert manifest.stage == "full" and manifest.seeds == (4, 9) and manifest.overrides == {"run.eval_every": 5}


def test_seeds_per_program_is_auto_unless_the_manifest_or_its_stage_sets_it():
    assert parse_manifest(BASE).seeds_per_program is None
    assert parse_manifest({**BASE, "seeds_per_program": 4}).seeds_per_program == 4
    staged = {**BASE, "seeds_per_program": 4, "stages": {**BASE["stages"], "mini": {"seeds_per_program": "auto"}}}
    assert parse_manifest(staged, "mini").seeds_per_program is None
    assert parse_manifest(staged, "full").seeds_per_program == 4


def test_a_grid_gives_one_variant_per_combination():
    raw = {k: v for k, v in BASE.items() if k != "variants"}
    manifest = parse_manifest({**raw, "grid": {"ppo.learning_rate": [1e-3, 3e-4], "ppo.entropy_cost": [0.01, 0]}})
    assert [v.name for v in manifest.variants] == [
        "learning_rate=0.001-entropy_cost=0.01", "learning_rate=0.001-entropy_cost=0",
        "learning_rate=0.0003-entropy_cost=0.01", "learning_rate=0.0003-entropy_cost=0"]
    assert manifest.variants[3].overrides == {"ppo.learning_rate": 3e-4, "ppo.entropy_cost": 0}


def grid_names(grid):
    raw = {k: v for k, v in BASE.items() if k != "variants"}
    return [v.name for v in parse_manifest({**raw, "grid": grid}).variants]


def test_grid_names_give_back_each_value_exactly():
    values = [1.0000001e-3, 1.0000002e-3, 1e-5, 0.1 + 0.2, 2.5e-10]
    names = grid_names({"ppo.learning_rate": values})
    assert len(set(names)) == len(values)
    assert [float(name.removeprefix("learning_rate=")) for name in names] == values
    assert names[:3] == ["learning_rate=0.0010000001", "learning_rate=0.0010000002", "learning_rate=1e-05"]


def test_grid_names_are_one_path_safe_directory_with_a_stable_hash_where_needed():
    long_text = "x" * 100
    names = grid_names({"run.wandb_project": ["a/b", "a_b", "c\\d", ".hidden", long_text, "a~b"]})
    digest = {value: hashlib.sha256(json.dumps(value).encode()).hexdigest()[:8]
              for value in ("a/b", "c\\d", ".hidden", long_text, "a~b")}
    assert names == ["wandb_project=a_b~" + digest["a/b"], "wandb_project=a_b", "wandb_project=c_d~" + digest["c\\d"],
                     "wandb_project=.hidden", "wandb_project=" + "x" * 20 + "~" + digest[long_text],
                     "wandb_project=a_b~" + digest["a~b"]]
    assert names[3] == "wandb_project=.hidden"  # the key comes first: the directory is not hidden
    for name in names:
        assert "/" not in name and "\\" not in name and not name.startswith(".")


def test_grid_names_stay_unique_when_two_combinations_read_alike():
    names = grid_names({"run.wandb_project": ["p-entropy_cost=1", "p"], "ppo.entropy_cost": ["1-entropy_cost=1", "1"]})
    assert len(set(names)) == 4
    assert "wandb_project=p-entropy_cost=1-entropy_cost=1" not in names  # the two that read alike carry hashes


def test_grid_names_use_the_whole_key_where_two_keys_end_alike():
    names = grid_names({"env.overrides": [{"ctrl_dt": 0.02}], "run.overrides_note": ["x"], "run.seed": [1, 2]})
    assert names[0] == "overrides={ctrl_dt: 0.02}-overrides_note=x-seed=1"
    assert grid_names({"ppo.x": [1], "run.x": [2]}) == ["ppo.x=1-run.x=2"]


def test_a_name_too_long_for_a_directory_is_cut_and_ends_with_a_hash():
    grid = {f"run.key{i}": ["v" * 39] for i in range(8)}
    [name] = grid_names(grid)
    assert len(name.encode()) <= 200 and len(name.split("~")[-1]) == 8


@pytest.mark.parametrize("value", [1e-3, 3, "text", [1, 2], {"ctrl_dt": 0.02, "x": [1]}, True, ""])
def test_override_strings_read_back_as_the_same_value(value):
    [text] = override_strings({"section.key": value})
    assert parse_override(text) == ("section.key", value)


@pytest.mark.parametrize("change, message", [
    ({"seed": 3}, "the manifest: unknown key 'seed' (did you mean seeds?)"),
    ({"seeds": 0}, "seeds must be a positive count or a list of distinct seeds"),
    ({"seeds": [1, 1]}, "seeds must be a positive count or a list of distinct seeds"),
    ({"seeds": [0, 4294967296]}, "the manifest: seeds[1] is 4294967296; a seed must be an integer from 0 to 4294967295"),
    ({"seeds": 2**32 + 1}, "the manifest: seeds: a count of 4294967297 seeds goes past the largest seed"),
    ({"suites": {"s": {"set": {"env.overrides": [1]}}}}, "suites.s.set: env.overrides must be a mapping"),
    ({"variants": [{"name": "a"}, {"name": "a"}]}, "variant names must differ"),
    ({"variants": [{"name": "a", "sett": {}}]}, "variants[0]: unknown key 'sett'"),
    ({"grid": {"ppo.learning_rate": [1e-3]}}, "give variants or grid, not both"),
    ({"suites": {"s": {"episodes": 0}}}, "suites.s.episodes must be a positive integer"),
    ({"name": "a b"}, "name must be letters, digits"),
    ({"env": ""}, "env must be a non-empty string"),
    ({"ratios": {"numerator": "suite/shifted", "denominator": "final_eval_reward"}},
     "the manifest: ratios must be a list of {numerator, denominator}"),
    ({"ratios": [{"numerator": "suite/shifted", "denominatr": "final_eval_reward"}]},
     "the manifest: ratios[0]: unknown key 'denominatr' (did you mean denominator?); allowed: numerator, denominator"),
    ({"ratios": [{"numerator": "suite/shifted"}]}, "ratios[0].denominator must be a non-empty string, got None"),
    ({"ratios": ["suite/shifted"]}, "ratios[0] must be a mapping"),
    ({"seeds_per_program": 0}, "seeds_per_program must be 'auto' or a positive count, got 0"),
    ({"seeds_per_program": "all"}, "seeds_per_program must be 'auto' or a positive count, got 'all'"),
])
def test_bad_manifests_name_the_problem(change, message):
    with pytest.raises(UserError) as error:
        parse_manifest({**BASE, **change})
    assert message in str(error.value)


def test_ratios_are_read_in_order():
    ratios = [{"numerator": "suite/shifted", "denominator": "final_eval_reward"},
              {"numerator": "final_eval_reward", "denominator": "suite/shifted"}]
    assert parse_manifest({**BASE, "ratios": ratios}).ratios == (("suite/shifted", "final_eval_reward"),
                                                                 ("final_eval_reward", "suite/shifted"))
    assert parse_manifest(BASE).ratios == ()


def test_an_unknown_ratio_measure_lists_the_measures():
    manifest = parse_manifest({**BASE, "measures": ["final_eval_reward", "final_description_length_bits"],
                               "ratios": [{"numerator": "suite/shifted", "denominator": "sps"}]})
    with pytest.raises(UserError) as error:
        check_ratios(manifest.ratios, measure_names(manifest))
    assert str(error.value) == ("ratios[0].denominator names 'sps', which is not a measure; choose from "
                                "final_eval_reward, final_description_length_bits, suite/shifted")


def test_an_unknown_stage_lists_the_known_ones():
    with pytest.raises(UserError, match="unknown stage 'mini'; the manifest defines: gpu-test, full"):
        parse_manifest(BASE, "mini")


@pytest.mark.parametrize("change, message", [
    ({"variants": [{"name": "odd", "set": {"ppo.num_envs": 1536}}]}, "variants[0].set (variant 'odd'): ppo.batch_size"),
    ({"set": {"ppo.learning_rat": 1}}, "unknown config key 'ppo.learning_rat'"),
    ({"measures": ["reward"]}, "unknown measure 'reward'"),
    ({"correlations": [{"x": "ppo.nothing", "y": "final_eval_reward"}]}, "correlation names 'ppo.nothing'"),
    ({"measures": ["final_eval_reward", "final_description_length_bits"],  # a summary measure, known
      "ratios": [{"numerator": "suite/shiftd", "denominator": "final_description_length_bits"}]},
     "ratios[0].numerator names 'suite/shiftd', which is not a measure (did you mean suite/shifted?); "
     "choose from final_eval_reward, final_description_length_bits, suite/shifted"),
])
def test_the_cli_refuses_a_bad_manifest_in_one_line_and_runs_nothing(capsys, tmp_path, change, message):
    from rlfit.cli import main  # in this process: the same code path as `rlfit experiment`, without a start-up

    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump({**BASE, **change}))
    code = main(["experiment", str(path), "--dir", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    [line] = captured.err.strip().splitlines()
    assert line.startswith("rlfit: error: ") and message in line
    assert captured.out == "" and not (tmp_path / "out").exists()


def test_a_bad_seeds_per_program_on_the_command_line_is_one_line_and_runs_nothing(capsys, tmp_path):
    from rlfit.cli import main

    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(BASE))
    code = main(["experiment", str(path), "--dir", str(tmp_path / "out"), "--seeds-per-program", "many"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.strip() == ("rlfit: error: --seeds-per-program: seeds_per_program must be 'auto' or a "
                                    "positive count, got 'many'")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", [-1, 0, "1000", True, float("inf")])
def test_a_reference_return_must_be_a_positive_number(value):
    with pytest.raises(UserError, match=r"^the manifest: reference_return must be a positive number"):
        parse_manifest({"name": "x", "env": "CartpoleBalance", "reference_return": value})
    assert parse_manifest({"name": "x", "env": "CartpoleBalance", "reference_return": 1000}).reference_return == 1000.0


def test_a_suite_names_the_policy_it_evaluates_most_likely_by_default():
    suites = {"own": {}, "sampled": {"policy": "stochastic", "episodes": 4}}
    manifest = parse_manifest({**BASE, "suites": suites})
    assert [(s.name, s.policy) for s in manifest.suites] == [("own", "most-likely"), ("sampled", "stochastic")]


def test_an_unknown_suite_policy_is_one_line_naming_the_choices():
    with pytest.raises(UserError) as error:
        parse_manifest({**BASE, "suites": {"own": {"policy": "stochastc"}}}, where="m.yaml")
    message = str(error.value)
    assert message.startswith("m.yaml: suites.own.policy must be one of most-likely, stochastic, got 'stochastc'")
    assert "(did you mean stochastic?)" in message and "\n" not in message


def test_generalization_entries_are_triples_of_measures():
    entry = {"ood": "suite/shifted/success_rate", "in_distribution": "final_eval_reward",
             "description": "final_description_length_bits"}
    manifest = parse_manifest({**BASE, "generalization": [entry]})
    assert manifest.generalization == (("suite/shifted/success_rate", "final_eval_reward",
                                        "final_description_length_bits"),)
    with pytest.raises(UserError, match=r"generalization\[0\]: unknown key"):
        parse_manifest({**BASE, "generalization": [{**entry, "x": "y"}]}, where="m.yaml")


def test_a_generalization_entry_naming_no_measure_is_one_line():
    from rlfit.study.experiment import check_manifest

    entry = {"ood": "suite/shifted/succes_rate", "in_distribution": "final_eval_reward",
             "description": "final_description_length_bits"}
    manifest = parse_manifest({**BASE, "measures": ["final_eval_reward", "final_description_length_bits"],
                               "generalization": [entry]})
    with pytest.raises(UserError) as error:
        check_manifest(manifest, "m.yaml")
    message = str(error.value)
    assert message.startswith("m.yaml: generalization[0].ood names 'suite/shifted/succes_rate', which is not a measure")
    assert "suite/shifted/success_rate" in message and "\n" not in message
