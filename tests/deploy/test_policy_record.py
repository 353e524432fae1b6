"""policy.json is a `PolicyDescription`: a real run's file has exactly the record's fields (nested ones too) and
reads back into the record and out again unchanged; a format-1 file of an older rlfit still reads."""

from __future__ import annotations

import dataclasses
import json

from rlfit.deploy.policy_file import DESCRIPTION_FILE
from rlfit.deploy.policy_record import PolicyDescription, PolicyNetwork, PolicyObservation
from tests.conftest import REPO_ROOT


def test_a_real_run_s_policy_json_has_exactly_the_record_s_fields_and_round_trips(toy_run):
    written = json.loads((toy_run(0).run_dir.path / "policy" / DESCRIPTION_FILE).read_text())
    assert list(written) == [field.name for field in dataclasses.fields(PolicyDescription)]
    assert list(written["network"]) == [field.name for field in dataclasses.fields(PolicyNetwork) if field.name != "encoder"]
    assert list(written["observation"]) == [field.name for field in dataclasses.fields(PolicyObservation)]
    record = PolicyDescription.from_json(written)
    assert isinstance(record.network, PolicyNetwork) and record.network.encoder is None
    assert record.network.layer_sizes == [32, 32, 2] and record.action_space.size == 1
    assert record.to_json() == written


def test_an_encoder_network_writes_its_encoder_after_its_kind():
    network = PolicyNetwork(kind="encoder_mlp", encoder={"kind": "cnn"}, layer_sizes=[4], activation="relu",
                            head="categorical", output="logits")
    assert list(network.to_json()) == ["kind", "encoder", "layer_sizes", "activation", "head", "output"]
    assert PolicyNetwork.from_json(network.to_json()) == network


def test_a_format_1_policy_json_of_an_older_rlfit_reads_with_what_it_lacks_as_none():
    old = json.loads((REPO_ROOT / "tests" / "deploy" / "data" / "policy_format1" / "continuous" / DESCRIPTION_FILE)
                     .read_text())
    record = PolicyDescription.from_json(old)
    assert record.format == "rlfit-policy" and record.format_version == 1
    assert record.network.head is None  # written before heads were recorded: read as the action space's own
    assert record.network.layer_sizes == [8, 8, 4] and record.observation.input_shape == [2]
    assert record.to_json() == {**old, "network": {**old["network"], "head": None}}
