"""The four encoders: shapes, one compile per shape, gradients, input scaling, parameter counts, the registry."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.errors import UserError
from rlfit.networks.encoders import ENCODERS, EncoderSpec, choose_encoder, make_encoder, resolve

SMALL = {
    "simple2dcnn": EncoderSpec("simple2dcnn", features=16, frames=3, image_size=24),
    "simple3dcnn": EncoderSpec("simple3dcnn", features=16, frames=4, image_size=24),
    # r3d18 at 16 px: its four stride-2 stages still leave a 1 x 1 map for the last block; at 32 px one step of it
    # ran 3 times as long on a CPU.
    "r3d18": EncoderSpec("r3d18", features=32, frames=4, image_size=16, norm="group"),
    "r3d18_frozen_bn": EncoderSpec("r3d18", features=512, frames=4, image_size=16, norm="frozen_bn"),
    "timesformer": EncoderSpec("timesformer", features=24, frames=4, image_size=32, preset="small"),
}


def random_frames(spec: EncoderSpec, batch: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, spec.input_shape(batch), dtype=np.uint8)


@pytest.mark.parametrize("case", sorted(SMALL))
def test_an_encoder_maps_uint8_clips_to_features_compiles_once_and_every_parameter_learns(case):
    spec = SMALL[case]
    module = make_encoder(spec)
    # one program, not op by op; XLA's own random bits, not threefry's: R3D-18's 33 M numbers in a third of the time
    variables = jax.jit(module.init)(jax.random.key(0, impl="rbg"), random_frames(spec, 1))
    params = variables["params"]
    frozen = {k: v for k, v in variables.items() if k != "params"}  # r3d18 frozen_bn: batch_stats, never trained
    readout = jax.random.normal(jax.random.PRNGKey(1), (spec.features,))
    traces = []

    def loss(params, frames):
        features = module.apply({"params": params, **frozen}, frames)
        return jnp.mean(jnp.sin(features @ readout)), features  # not a plain sum: LayerNorm's sum has no gradient

    def step(params, frames):
        traces.append(frames.shape)  # runs once per trace
        return jax.value_and_grad(loss, has_aux=True)(params, frames)

    step = jax.jit(step)
    (_, features), grads = step(params, random_frames(spec, 2, seed=1))
    (_, again), _ = step(params, random_frames(spec, 2, seed=2))
    assert features.shape == (2, spec.features) and features.dtype == jnp.float32
    assert np.isfinite(np.asarray(features)).all() and np.isfinite(np.asarray(again)).all()
    assert not np.allclose(features, again)  # the input matters
    assert len(traces) == 1, f"compiled {len(traces)} times for one shape"
    leaves = jax.tree_util.tree_leaves_with_path(grads)
    dead = [jax.tree_util.keystr(path) for path, g in leaves if not np.any(np.asarray(g))]
    assert not dead, f"no gradient reaches {dead}"
    if "frozen_bn" in case:
        assert set(frozen) == {"batch_stats"}
        stats = jax.tree.leaves(frozen["batch_stats"])
        assert all(float(jnp.abs(s).max()) in (0.0, 1.0) for s in stats)  # mean 0, var 1 without pretrained weights


def test_uint8_frames_are_scaled_to_zero_one_and_the_spec_normalization_applies_per_channel():
    mean, std = (0.2, 0.5, 0.7), (0.3, 0.2, 0.1)
    plain = make_encoder(SMALL["simple2dcnn"])
    normalized = make_encoder(SMALL["simple2dcnn"]._replace(mean=mean, std=std))
    frames = random_frames(SMALL["simple2dcnn"], 2)
    variables = plain.init(jax.random.PRNGKey(0), frames)
    as_float = frames.astype(np.float32) / 255.0
    np.testing.assert_allclose(plain.apply(variables, frames), plain.apply(variables, as_float), atol=1e-6)
    by_hand = (as_float - np.array(mean, np.float32)) / np.array(std, np.float32)
    np.testing.assert_allclose(normalized.apply(variables, frames), plain.apply(variables, by_hand), atol=1e-5)


def test_simple2dcnn_is_drq_four_valid_3x3_convolutions_over_frames_stacked_on_channels():
    spec = EncoderSpec("simple2dcnn", features=50, frames=3, image_size=84)
    shapes = jax.eval_shape(make_encoder(spec).init, jax.random.PRNGKey(0), jnp.zeros(spec.input_shape(1), jnp.uint8))
    params = shapes["params"]
    assert params["conv_0"]["kernel"].shape == (3, 3, 9, 32)  # 3 RGB frames = 9 channels
    assert [params[f"conv_{i}"]["kernel"].shape[-1] for i in range(4)] == [32] * 4
    assert params["dense"]["kernel"].shape == (35 * 35 * 32, 50)  # 84 -> 41 (stride 2) -> 39 -> 37 -> 35


def r3d18_parameter_count_by_hand() -> int:
    """torchvision's r3d_18 written down from its definition (not from rlfit's code), fc excluded."""
    bn = lambda c: 2 * c  # noqa: E731  (weight and bias; running statistics are buffers)
    conv = lambda cin, cout, k: cin * cout * k  # noqa: E731  (bias=False everywhere)
    total = conv(3, 64, 3 * 7 * 7) + bn(64)  # stem
    inplanes = 64
    for planes, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for block in range(2):
            total += conv(inplanes, planes, 27) + bn(planes) + conv(planes, planes, 27) + bn(planes)
            if block == 0 and (stride != 1 or inplanes != planes):
                total += conv(inplanes, planes, 1) + bn(planes)  # downsample
            inplanes = planes
    return total


def test_r3d18_has_torchvisions_parameter_count_without_the_classifier():
    by_hand = r3d18_parameter_count_by_hand()
    assert by_hand == 33_371_472 - (512 * 400 + 400) == 33_166_272  # torchvision's published 400-class count
    for norm in ("frozen_bn", "group"):
        spec = EncoderSpec("r3d18", features=512, frames=16, image_size=112, norm=norm)
        shapes = jax.eval_shape(make_encoder(spec).init, jax.random.PRNGKey(0),
                                jnp.zeros(spec.input_shape(1), jnp.uint8))
        assert sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(shapes["params"])) == by_hand
        assert "projection" not in shapes["params"]  # features == 512: the pooled vector is the output
    projected = EncoderSpec("r3d18", features=256, frames=4, image_size=32, norm="frozen_bn")
    shapes = jax.eval_shape(make_encoder(projected).init, jax.random.PRNGKey(0),
                            jnp.zeros(projected.input_shape(1), jnp.uint8))
    assert shapes["params"]["projection"]["kernel"].shape == (512, 256)


def test_r3d18_feature_maps_have_torchvisions_shapes_for_a_16x112x112_clip():
    spec = EncoderSpec("r3d18", features=512, frames=16, image_size=112, norm="group")
    module = make_encoder(spec)
    frames = jnp.zeros(spec.input_shape(1), jnp.uint8)
    variables = jax.eval_shape(module.init, jax.random.PRNGKey(0), frames)
    _, state = jax.eval_shape(lambda v, x: module.apply(v, x, capture_intermediates=True, mutable=["intermediates"]),
                              variables, frames)
    inner = state["intermediates"]
    assert inner["stem_conv"]["__call__"][0].shape == (1, 16, 56, 56, 64)
    assert inner["layer1_1"]["__call__"][0].shape == (1, 16, 56, 56, 64)
    assert inner["layer2_0"]["__call__"][0].shape == (1, 8, 28, 28, 128)
    assert inner["layer3_1"]["__call__"][0].shape == (1, 4, 14, 14, 256)
    assert inner["layer4_1"]["__call__"][0].shape == (1, 2, 7, 7, 512)


def timesformer_parameter_count_by_hand(hidden=768, depth=12, patch=16, image=224, frames=8, channels=3) -> int:
    """Hugging Face's TimesformerModel (divided space-time, qkv bias, MLP 4x) counted from its definition."""
    linear = lambda i, o: i * o + o  # noqa: E731
    layer_norm = 2 * hidden
    attention = linear(hidden, 3 * hidden) + linear(hidden, hidden)  # qkv + output.dense
    per_layer = (layer_norm + attention + linear(hidden, hidden)  # temporal: layernorm, attention, temporal_dense
                 + layer_norm + attention  # spatial
                 + layer_norm + linear(hidden, 4 * hidden) + linear(4 * hidden, hidden))  # MLP
    patches = (image // patch) ** 2
    embeddings = channels * patch * patch * hidden + hidden + hidden + (patches + 1) * hidden + frames * hidden
    return embeddings + depth * per_layer + layer_norm


def test_timesformer_base_has_hugging_faces_parameter_count():
    by_hand = timesformer_parameter_count_by_hand()
    assert 121_000_000 < by_hand < 121_500_000  # HF's timesformer-base: ~121 M without the classifier
    spec = EncoderSpec("timesformer", features=768, frames=8, image_size=224, preset="base")
    shapes = jax.eval_shape(make_encoder(spec).init, jax.random.PRNGKey(0), jnp.zeros(spec.input_shape(1), jnp.uint8))
    assert sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(shapes["params"])) == by_hand
    small = EncoderSpec("timesformer", features=128, frames=8, image_size=64, preset="small")
    shapes = jax.eval_shape(make_encoder(small).init, jax.random.PRNGKey(0), jnp.zeros(small.input_shape(1), jnp.uint8))
    assert sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(shapes["params"])) == \
        timesformer_parameter_count_by_hand(hidden=128, depth=4, patch=8, image=64, frames=8)


def test_auto_picks_a_2d_cnn_for_few_frames_on_a_cpu_a_3d_cnn_for_more_and_r3d18_on_a_gpu():
    assert choose_encoder("auto", "cpu", 3) == "simple2dcnn"
    assert choose_encoder("auto", "cpu", 4) == "simple2dcnn"
    assert choose_encoder("auto", "cpu", 8) == "simple3dcnn"
    assert choose_encoder("auto", "gpu", 3) == "r3d18"
    assert choose_encoder("auto", "cuda", 16) == "r3d18"
    assert choose_encoder("timesformer", "cpu", 8) == "timesformer"
    with pytest.raises(UserError, match=r"unknown encoder 'r3d_18' \(did you mean r3d18\?\)") as error:
        choose_encoder("r3d_18", "cpu", 8)
    assert "\n" not in str(error.value)


def test_a_spec_round_trips_through_a_dict_and_gets_its_defaults_resolved():
    spec = EncoderSpec("r3d18", 512, 16, 112, mean=(0.4, 0.4, 0.4), std=(0.2, 0.2, 0.2))
    assert EncoderSpec.from_dict(spec.to_dict()) == spec
    assert resolve(spec, pretrained=True).norm == "frozen_bn"
    assert resolve(spec, pretrained=False).norm == "group"
    assert resolve(EncoderSpec("timesformer", 128, 8, 64)).preset == "small"
    assert set(ENCODERS) == {"simple2dcnn", "simple3dcnn", "r3d18", "timesformer"}


@pytest.mark.parametrize("spec, message", [
    (EncoderSpec("simple2dcnn", 50, 3, 64, norm="group"), "applies only to r3d18"),
    (EncoderSpec("timesformer", 128, 8, 60, preset="small"), "must be a multiple of 8"),
    (EncoderSpec("simple2dcnn", 50, 3, 64, mean=(0.5,), std=(0.5,)), "1 numbers for 3 channels"),
    (EncoderSpec("r3d18", 512, 8, 64, channels=1), "takes RGB frames"),
])
def test_a_spec_that_does_not_fit_is_one_line_naming_the_setting(spec, message):
    with pytest.raises(UserError, match=message) as error:
        make_encoder(spec)
    assert "\n" not in str(error.value)
    with pytest.raises(UserError, match="unknown keys"):
        EncoderSpec.from_dict({**EncoderSpec("r3d18", 512, 16, 112).to_dict(), "dropout": 0.1})
