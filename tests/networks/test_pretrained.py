"""Encoder weights as safetensors: round trip, pickle refused, missing files named, leaves put into a model."""

from __future__ import annotations

import pickle
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.errors import UserError
from rlfit.networks.encoders import EncoderSpec, make_encoder
from rlfit.networks.pretrained import (
    FORMAT,
    apply_pretrained,
    flatten,
    load_encoder_weights,
    save_encoder_weights,
    spec_from_metadata,
    spec_metadata,
)

SPEC = EncoderSpec("r3d18", 512, 4, 32, norm="frozen_bn", mean=(0.43216, 0.394666, 0.37645),
                   std=(0.22803, 0.22145, 0.216989))


def tree() -> dict:
    rng = np.random.default_rng(0)
    return {"params": {"stem_conv": {"kernel": rng.normal(size=(3, 7, 7, 3, 4)).astype(np.float32)},
                       "stem_norm": {"scale": rng.normal(size=4).astype(np.float32),
                                     "bias": np.zeros(4, np.float32)}},
            "batch_stats": {"stem_norm": {"mean": rng.normal(size=4).astype(np.float32),
                                          "var": rng.uniform(0.5, 2, 4).astype(np.float32)}}}


def test_weights_and_metadata_round_trip_exactly(tmp_path):
    path = save_encoder_weights(tmp_path / "w.safetensors", tree(), spec_metadata(SPEC, source="r3d_18.pth"))
    loaded, metadata = load_encoder_weights(path)
    expected = flatten(tree())
    assert set(loaded) == set(expected) == {"params.stem_conv.kernel", "params.stem_norm.scale",
                                            "params.stem_norm.bias", "batch_stats.stem_norm.mean",
                                            "batch_stats.stem_norm.var"}
    for name, array in expected.items():
        assert loaded[name].dtype == array.dtype
        np.testing.assert_array_equal(loaded[name], array)
    assert metadata["format"] == FORMAT and metadata["source"] == "r3d_18.pth"
    assert spec_from_metadata(metadata) == SPEC  # the spec and its input normalization travel with the weights


def test_a_pickle_is_refused_in_one_line_naming_the_file_and_the_converter(tmp_path):
    path = tmp_path / "r3d_18.pth"
    with path.open("wb") as handle:
        pickle.dump({"stem.0.weight": np.zeros((64, 3, 3, 7, 7), np.float32)}, handle)
    with pytest.raises(UserError, match="r3d_18.pth is a pickle.*rlfit convert-weights") as error:
        load_encoder_weights(path)
    assert "\n" not in str(error.value)


def test_a_torch_zip_checkpoint_and_a_text_file_are_refused_too(tmp_path):
    archive = tmp_path / "model.pt"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("archive/data.pkl", pickle.dumps({"a": 1}))
    with pytest.raises(UserError, match="model.pt is a PyTorch \\(zip\\) checkpoint.*rlfit convert-weights"):
        load_encoder_weights(archive)
    text = tmp_path / "weights.safetensors"
    text.write_text("not weights at all")
    with pytest.raises(UserError, match="weights.safetensors is not a readable safetensors file "
                                        r"\(safetensors: Error while deserializing header") as error:
        load_encoder_weights(text)
    assert "pickle" not in str(error.value) and "\n" not in str(error.value)


def test_a_missing_file_names_the_setting_and_the_path(tmp_path):
    with pytest.raises(UserError, match=r"network\.pretrained: no file at .*nowhere\.safetensors") as error:
        load_encoder_weights(tmp_path / "nowhere.safetensors")
    assert "\n" not in str(error.value)


@pytest.fixture(scope="module")
def small_r3d18():
    spec = EncoderSpec("r3d18", 64, 4, 32, norm="frozen_bn")  # features 64: a fresh projection
    module = make_encoder(spec)
    return module, module.init(jax.random.PRNGKey(0), jnp.zeros(spec.input_shape(1), jnp.uint8))


def test_apply_pretrained_replaces_every_loaded_leaf_and_keeps_the_fresh_projection(small_r3d18):
    _, variables = small_r3d18
    flat = flatten(variables)
    rng = np.random.default_rng(1)
    loaded = {name: rng.normal(size=leaf.shape).astype(np.float32) for name, leaf in flat.items()
              if "projection" not in name}
    merged = flatten(apply_pretrained(variables, loaded))
    assert set(merged) == set(flat)
    for name in loaded:
        np.testing.assert_array_equal(merged[name], loaded[name])
        assert merged[name].dtype == flat[name].dtype
    np.testing.assert_array_equal(merged["params.projection.kernel"], flat["params.projection.kernel"])


def test_weights_that_do_not_fit_name_the_first_key_and_shapes_in_one_line(small_r3d18):
    _, variables = small_r3d18
    loaded = {name: np.zeros(leaf.shape, np.float32) for name, leaf in flatten(variables).items()
              if "projection" not in name}
    wrong = dict(loaded, **{"params.stem_conv.kernel": np.zeros((3, 7, 7, 3, 32), np.float32)})
    with pytest.raises(UserError, match=r"params\.stem_conv\.kernel is \(3, 7, 7, 3, 32\) in the file but "
                                        r"\(3, 7, 7, 3, 64\) in the model") as error:
        apply_pretrained(variables, wrong)
    assert "\n" not in str(error.value)
    extra = dict(loaded, **{"params.fc.kernel": np.zeros((512, 400), np.float32)})
    with pytest.raises(UserError, match=r"params\.fc\.kernel \(512, 400\) is in the file but not in the model"):
        apply_pretrained(variables, extra)
    partial = {name: array for name, array in loaded.items() if "layer4" not in name}
    with pytest.raises(UserError, match=r"params\.layer4_0\.conv1\.kernel .* is in the model but not in the file"):
        apply_pretrained(variables, partial)
