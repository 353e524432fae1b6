"""Converting torchvision r3d_18 and Hugging Face TimeSformer weights, checked against independent numpy references
written from the PyTorch definitions (torch layouts, torch's reshapes); against torch itself where it is installed."""

from __future__ import annotations

import json
import math
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from rlfit.errors import UserError
from rlfit.networks.convert import (
    convert_weights,
    r3d18_from_torch_state_dict,
    timesformer_from_hf_state_dict,
    timesformer_geometry,
)
from rlfit.networks.encoders import EncoderSpec, make_encoder
from rlfit.networks.pretrained import apply_pretrained, check_fits, flatten, load_encoder_weights, spec_from_metadata
from rlfit.networks.timesformer import TimeSformer

# --- torchvision r3d_18 -------------------------------------------------------------------------------------------


def torchvision_r3d18_state_dict(seed: int = 0) -> dict[str, np.ndarray]:
    """Random arrays under the names and shapes of torchvision's `r3d_18().state_dict()` (VideoResNet with
    BasicStem, Conv3DSimple, BasicBlock [2, 2, 2, 2], fc to 400 classes)."""
    rng = np.random.default_rng(seed)
    state: dict[str, np.ndarray] = {}

    def conv(name, cout, cin, kernel):
        fan_in = cin * int(np.prod(kernel))
        state[f"{name}.weight"] = rng.standard_normal((cout, cin, *kernel), np.float32) * np.float32(math.sqrt(2.0 / fan_in))

    def bn(name, channels):
        state[f"{name}.weight"] = rng.uniform(0.5, 1.5, channels).astype(np.float32)
        state[f"{name}.bias"] = rng.normal(0, 0.1, channels).astype(np.float32)
        state[f"{name}.running_mean"] = rng.normal(0, 0.1, channels).astype(np.float32)
        state[f"{name}.running_var"] = rng.uniform(0.5, 2.0, channels).astype(np.float32)
        state[f"{name}.num_batches_tracked"] = np.array(1000, np.int64)

    conv("stem.0", 64, 3, (3, 7, 7))
    bn("stem.1", 64)
    inplanes = 64
    for stage, (planes, stride) in enumerate(((64, 1), (128, 2), (256, 2), (512, 2)), start=1):
        for block in range(2):
            prefix = f"layer{stage}.{block}"
            conv(f"{prefix}.conv1.0", planes, inplanes, (3, 3, 3))
            bn(f"{prefix}.conv1.1", planes)
            conv(f"{prefix}.conv2.0", planes, planes, (3, 3, 3))
            bn(f"{prefix}.conv2.1", planes)
            if block == 0 and (stride != 1 or inplanes != planes):
                conv(f"{prefix}.downsample.0", planes, inplanes, (1, 1, 1))
                bn(f"{prefix}.downsample.1", planes)
            inplanes = planes
    state["fc.weight"] = rng.normal(size=(400, 512)).astype(np.float32)
    state["fc.bias"] = np.zeros(400, np.float32)
    return state


def torch_conv3d(x: np.ndarray, weight: np.ndarray, stride, padding) -> np.ndarray:
    """nn.Conv3d (no bias) in numpy float64: x [N, C, D, H, W], weight [O, C, kD, kH, kW] -> [N, O, D', H', W']."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), *[(p, p) for p in padding]))
    windows = sliding_window_view(x, weight.shape[2:], axis=(2, 3, 4))[:, :, ::stride[0], ::stride[1], ::stride[2]]
    out = np.tensordot(windows, weight.astype(np.float64), axes=([1, 5, 6, 7], [1, 2, 3, 4]))  # [N, D, H, W, O]
    return out.transpose(0, 4, 1, 2, 3)


def torch_bn_eval(x: np.ndarray, state: dict, name: str) -> np.ndarray:
    shape = (1, -1, 1, 1, 1)
    scale = state[f"{name}.weight"] / np.sqrt(state[f"{name}.running_var"].astype(np.float64) + 1e-5)
    return (x - state[f"{name}.running_mean"].reshape(shape)) * scale.reshape(shape) + state[f"{name}.bias"].reshape(
        shape)


def torchvision_r3d18_features(state: dict, clip: np.ndarray) -> np.ndarray:
    """torchvision r3d_18 in eval mode up to the average pool: clip [N, 3, T, H, W] -> [N, 512]."""
    relu = lambda x: np.maximum(x, 0)  # noqa: E731
    x = relu(torch_bn_eval(torch_conv3d(clip, state["stem.0.weight"], (1, 2, 2), (1, 3, 3)), state, "stem.1"))
    for stage, stride in zip(range(1, 5), (1, 2, 2, 2)):
        for block in range(2):
            p, s = f"layer{stage}.{block}", (stride if block == 0 else 1,) * 3
            out = relu(torch_bn_eval(torch_conv3d(x, state[f"{p}.conv1.0.weight"], s, (1, 1, 1)), state, f"{p}.conv1.1"))
            out = torch_bn_eval(torch_conv3d(out, state[f"{p}.conv2.0.weight"], (1, 1, 1), (1, 1, 1)), state,
                                f"{p}.conv2.1")
            if f"{p}.downsample.0.weight" in state:
                x = torch_bn_eval(torch_conv3d(x, state[f"{p}.downsample.0.weight"], s, (0, 0, 0)), state,
                                  f"{p}.downsample.1")
            x = relu(out + x)
    return x.mean(axis=(2, 3, 4))


@pytest.fixture(scope="module")
def r3d18_converted():
    state = torchvision_r3d18_state_dict()
    params, batch_stats = r3d18_from_torch_state_dict(state)
    return state, {"params": params, "batch_stats": batch_stats}


def test_every_r3d18_parameter_and_statistic_is_filled_and_the_classifier_dropped(r3d18_converted):
    state, variables = r3d18_converted
    spec = EncoderSpec("r3d18", 512, 4, 16, norm="frozen_bn")
    shapes = jax.eval_shape(make_encoder(spec).init, jax.random.PRNGKey(0), jnp.zeros(spec.input_shape(1), jnp.uint8))
    check_fits(shapes, flatten(variables), fresh=())  # both ways: nothing missing, nothing extra, shapes equal
    bn_tensors = sum(1 for key in state if key.endswith("running_mean"))
    assert len(flatten(variables)) == len([k for k in state if not k.startswith("fc.") and "num_batches" not in k])
    assert len(flatten(variables["batch_stats"])) == 2 * bn_tensors
    np.testing.assert_array_equal(variables["batch_stats"]["layer2_0"]["downsample_norm"]["var"],
                                  state["layer2.0.downsample.1.running_var"])


def test_the_converted_stem_convolution_computes_torchs_convolution(r3d18_converted):
    state, variables = r3d18_converted
    weight = state["stem.0.weight"]  # [O, I, kD, kH, kW]
    x = np.random.default_rng(3).normal(size=(1, 3, 3, 8, 8))  # torch layout [N, C, T, H, W]
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (3, 3), (3, 3)))
    expected = np.zeros((1, 64, 3, 4, 4))
    for t in range(3):  # an explicit direct convolution, stride (1, 2, 2)
        for i in range(4):
            for j in range(4):
                patch = padded[0, :, t:t + 3, 2 * i:2 * i + 7, 2 * j:2 * j + 7]
                expected[0, :, t, i, j] = np.einsum("cdhw,ocdhw->o", patch, weight)
    got = jax.lax.conv_general_dilated(
        jnp.asarray(x.transpose(0, 2, 3, 4, 1), jnp.float32), variables["params"]["stem_conv"]["kernel"],
        window_strides=(1, 2, 2), padding=((1, 1), (3, 3), (3, 3)),
        dimension_numbers=("NDHWC", "DHWIO", "NDHWC"), precision=jax.lax.Precision.HIGHEST)
    np.testing.assert_allclose(np.asarray(got).transpose(0, 4, 1, 2, 3), expected, atol=1e-5)


def test_rlfits_r3d18_with_converted_weights_computes_torchvisions_eval_forward(r3d18_converted):
    state, variables = r3d18_converted
    spec = EncoderSpec("r3d18", 512, 4, 16, norm="frozen_bn")
    clip = np.random.default_rng(4).uniform(0, 1, spec.input_shape(2)).astype(np.float32)  # [B, T, H, W, C]
    reference = torchvision_r3d18_features(state, clip.transpose(0, 4, 1, 2, 3))
    for conv_impl in ("native", "taps"):  # XLA's 3D convolutions, and the CPU's sums of 2D ones
        ours = jax.jit(make_encoder(spec, conv_impl=conv_impl).apply)(variables, clip)  # op by op: seconds
        np.testing.assert_allclose(np.asarray(ours), reference, rtol=1e-4, atol=1e-4)


def test_a_state_dict_of_another_model_is_one_line():
    with pytest.raises(UserError, match="features.0.weight is not a parameter of torchvision's r3d_18"):
        r3d18_from_torch_state_dict({"features.0.weight": np.zeros((64, 3, 3, 3), np.float32)})


# --- Hugging Face TimeSformer -------------------------------------------------------------------------------------

TINY = {"hidden": 32, "depth": 2, "heads": 4, "patch": 8, "image": 16, "frames": 3, "channels": 3}


def hf_timesformer_state_dict(hidden, depth, patch, image, frames, channels, seed=0, prefix="") -> dict:
    """Random arrays under the names and shapes of HF `TimesformerModel.state_dict()` (torch layouts)."""
    rng = np.random.default_rng(seed)
    state: dict[str, np.ndarray] = {}

    def put(name, *shape, scale=0.2):
        state[prefix + name] = rng.standard_normal(shape, np.float32) * np.float32(scale)  # float32: 5x faster

    def linear(name, fan_in, fan_out):
        put(f"{name}.weight", fan_out, fan_in, scale=1 / math.sqrt(fan_in))
        put(f"{name}.bias", fan_out, scale=0.05)

    def layer_norm(name):
        state[prefix + f"{name}.weight"] = rng.uniform(0.5, 1.5, hidden).astype(np.float32)
        put(f"{name}.bias", hidden, scale=0.05)

    put("embeddings.cls_token", 1, 1, hidden)
    put("embeddings.position_embeddings", 1, (image // patch) ** 2 + 1, hidden)
    put("embeddings.time_embeddings", 1, frames, hidden)
    put("embeddings.patch_embeddings.projection.weight", hidden, channels, patch, patch, scale=0.1)
    put("embeddings.patch_embeddings.projection.bias", hidden, scale=0.05)
    for i in range(depth):
        p = f"encoder.layer.{i}"
        for attention in ("attention", "temporal_attention"):
            linear(f"{p}.{attention}.attention.qkv", hidden, 3 * hidden)
            linear(f"{p}.{attention}.output.dense", hidden, hidden)
        linear(f"{p}.temporal_dense", hidden, hidden)
        linear(f"{p}.intermediate.dense", hidden, 4 * hidden)
        linear(f"{p}.output.dense", 4 * hidden, hidden)
        for norm in ("layernorm_before", "layernorm_after", "temporal_layernorm"):
            layer_norm(f"{p}.{norm}")
    layer_norm("layernorm")
    return state


def hf_timesformer_cls(state: dict, pixel_values: np.ndarray, heads: int, frames: int, image: int, patch: int):
    """HF TimesformerModel's forward (divided space-time, eval) in numpy float64, following its reshapes line by
    line: pixel_values [B, T, C, H, W] -> the final layer-normed CLS token [B, D]."""
    s = {k: v.astype(np.float64) for k, v in state.items()}
    erf = np.vectorize(math.erf)

    def linear(x, name):
        return x @ s[f"{name}.weight"].T + s[f"{name}.bias"]

    def layer_norm(x, name):
        mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-6) * s[f"{name}.weight"] + s[f"{name}.bias"]

    def attention(x, name):  # TimeSformerAttention
        b, n, c = x.shape
        qkv = linear(x, f"{name}.attention.qkv").reshape(b, n, 3, heads, c // heads).transpose(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        a = q @ k.transpose(0, 1, 3, 2) * (c // heads) ** -0.5
        a = np.exp(a - a.max(-1, keepdims=True))
        a = a / a.sum(-1, keepdims=True)
        return linear((a @ v).transpose(0, 2, 1, 3).reshape(b, n, c), f"{name}.output.dense")

    b, t, c, h, w = pixel_values.shape
    x = torch_conv3d(pixel_values.reshape(b * t, c, 1, h, w), s["embeddings.patch_embeddings.projection.weight"][
        :, :, None], (1, patch, patch), (0, 0, 0))[:, :, 0] + s["embeddings.patch_embeddings.projection.bias"][
        None, :, None, None]
    x = x.reshape(b * t, x.shape[1], -1).transpose(0, 2, 1)  # flatten(2).transpose(1, 2)
    cls = np.broadcast_to(s["embeddings.cls_token"], (b * t, 1, x.shape[2]))
    x = np.concatenate([cls, x], 1) + s["embeddings.position_embeddings"]
    cls = x[:b, 0, :][:, None]
    x = x[:, 1:]
    _, n, d = x.shape
    x = x.reshape(b, t, n, d).transpose(0, 2, 1, 3).reshape(b * n, t, d) + s["embeddings.time_embeddings"]
    x = np.concatenate([cls, x.reshape(b, n * t, d)], 1)
    side = image // patch
    for i in range(sum(1 for k in s if k.endswith("temporal_dense.weight"))):
        p = f"encoder.layer.{i}"
        temporal = x[:, 1:].reshape(b, side, side, t, d).reshape(b * side * side, t, d)
        temporal = attention(layer_norm(temporal, f"{p}.temporal_layernorm"), f"{p}.temporal_attention")
        temporal = linear(temporal.reshape(b, side, side, t, d).reshape(b, side * side * t, d), f"{p}.temporal_dense")
        temporal = x[:, 1:] + temporal
        init_cls = x[:, 0][:, None]
        cls = np.repeat(init_cls, t, axis=1).reshape(b * t, 1, d)
        spatial = temporal.reshape(b, side, side, t, d).transpose(0, 3, 1, 2, 4).reshape(b * t, side * side, d)
        spatial = attention(layer_norm(np.concatenate([cls, spatial], 1), f"{p}.layernorm_before"), f"{p}.attention")
        cls = spatial[:, 0].reshape(b, t, d).mean(1, keepdims=True)
        residual = spatial[:, 1:].reshape(b, t, side, side, d).transpose(0, 2, 3, 1, 4).reshape(b, side * side * t, d)
        x = np.concatenate([init_cls, temporal], 1) + np.concatenate([cls, residual], 1)
        mlp = linear(layer_norm(x, f"{p}.layernorm_after"), f"{p}.intermediate.dense")
        x = x + linear(0.5 * mlp * (1 + erf(mlp / math.sqrt(2))), f"{p}.output.dense")
    return layer_norm(x, "layernorm")[:, 0]


def tiny_timesformer(features=TINY["hidden"]) -> TimeSformer:
    return TimeSformer(features=features, frames=TINY["frames"], image_size=TINY["image"], patch_size=TINY["patch"],
                       hidden=TINY["hidden"], depth=TINY["depth"], heads=TINY["heads"])


def test_rlfits_timesformer_with_converted_weights_computes_hugging_faces_forward():
    state = hf_timesformer_state_dict(TINY["hidden"], TINY["depth"], TINY["patch"], TINY["image"], TINY["frames"],
                                      TINY["channels"], prefix="timesformer.")  # a ForVideoClassification file
    state["classifier.weight"] = np.zeros((400, TINY["hidden"]), np.float32)
    params = timesformer_from_hf_state_dict(state)
    model = tiny_timesformer()
    shapes = jax.eval_shape(model.init, jax.random.PRNGKey(0), jnp.zeros((1, 3, 16, 16, 3)))
    check_fits(shapes, flatten({"params": params}), fresh=())
    assert timesformer_geometry(params) == {"patch_size": 8, "hidden": 32, "channels": 3, "frames": 3,
                                            "image_size": 16, "depth": 2}
    clip = np.random.default_rng(5).uniform(0, 1, (2, 3, 16, 16, 3)).astype(np.float32)  # [B, T, H, W, C]
    ours = jax.jit(model.apply)({"params": params}, clip)
    reference = hf_timesformer_cls({k.removeprefix("timesformer."): v for k, v in state.items()},
                                   clip.transpose(0, 1, 4, 2, 3), TINY["heads"], TINY["frames"], TINY["image"],
                                   TINY["patch"])
    np.testing.assert_allclose(np.asarray(ours), reference, rtol=1e-4, atol=1e-4)


def test_convert_weights_reads_a_safetensors_checkpoint_without_torch_and_records_the_spec(tmp_path):
    from safetensors.numpy import save_file

    state = hf_timesformer_state_dict(768, 12, 16, 224, 8, 3, seed=1)
    save_file(state, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({"num_attention_heads": 12}))
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"image_mean": [0.45] * 3, "image_std": [0.225] * 3}))
    out = convert_weights(str(tmp_path / "model.safetensors"), "timesformer", tmp_path / "tsf.safetensors")
    loaded, metadata = load_encoder_weights(out)
    spec = spec_from_metadata(metadata)
    assert spec == EncoderSpec("timesformer", 768, 8, 224, 3, preset="base", mean=(0.45,) * 3, std=(0.225,) * 3)
    assert metadata["kind"] == "timesformer" and metadata["source"] == "model.safetensors"
    np.testing.assert_array_equal(loaded["params.layer_11.temporal_dense.kernel"],
                                  state["encoder.layer.11.temporal_dense.weight"].T)


def test_convert_weights_writes_r3d18_weights_that_load_into_the_encoder(tmp_path):
    from safetensors.numpy import save_file

    save_file(torchvision_r3d18_state_dict(seed=2), str(tmp_path / "r3d_18.safetensors"))
    out = convert_weights(str(tmp_path / "r3d_18.safetensors"), "r3d18", tmp_path / "r3d18.safetensors")
    loaded, metadata = load_encoder_weights(out)
    spec = spec_from_metadata(metadata)
    assert spec.name == "r3d18" and spec.norm == "frozen_bn" and spec.mean == (0.43216, 0.394666, 0.37645)
    run_spec = spec._replace(features=64, frames=4, image_size=32)  # a run's own size and features: a fresh projection
    module = make_encoder(run_spec)
    # the encoder's variables as zeros of init's shapes (init's 33 M random numbers, all but the projection's
    # replaced by the file's, took 7 s op by op); the forward pass compiled whole (2 s op by op)
    shapes = jax.eval_shape(module.init, jax.random.PRNGKey(0), jnp.zeros(run_spec.input_shape(1), jnp.uint8))
    variables = apply_pretrained(jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), shapes), loaded)
    assert jax.jit(module.apply)(variables, jnp.zeros(run_spec.input_shape(2), jnp.uint8)).shape == (2, 64)


def test_convert_weights_refuses_unknown_kinds_missing_files_and_pickles_without_torch(tmp_path):
    with pytest.raises(UserError, match="unknown kind 'resnet'"):
        convert_weights(str(tmp_path / "x.pth"), "resnet", tmp_path / "out.safetensors")
    with pytest.raises(UserError, match="no file at"):
        convert_weights(str(tmp_path / "x.pth"), "r3d18", tmp_path / "out.safetensors")
    try:
        import torch  # noqa: F401
    except ImportError:
        path = tmp_path / "r3d_18.pth"
        path.write_bytes(pickle.dumps({"a": 1}))
        with pytest.raises(UserError, match=r"needs torch: pip install 'rlfit\[torch\]'") as error:
            convert_weights(str(path), "r3d18", tmp_path / "out.safetensors")
        assert "\n" not in str(error.value)


# --- against torch itself, where it is installed ------------------------------------------------------------------


def test_r3d18_matches_torchvisions_r3d_18_on_the_same_random_weights():
    torch = pytest.importorskip("torch", reason="comparing with torchvision needs torch (pip install 'rlfit[torch]')")
    video = pytest.importorskip("torchvision.models.video", reason="comparing with torchvision needs torchvision")
    torch.manual_seed(0)
    model = video.r3d_18(weights=None).eval()
    with torch.no_grad():  # non-trivial statistics, so frozen BN is really exercised
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm3d):
                module.running_mean.uniform_(-0.1, 0.1)
                module.running_var.uniform_(0.5, 2.0)
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.1, 0.1)
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    params, batch_stats = r3d18_from_torch_state_dict(state)
    clip = np.random.default_rng(6).uniform(0, 1, (2, 4, 32, 32, 3)).astype(np.float32)
    model.fc = torch.nn.Identity()
    with torch.no_grad():
        expected = model(torch.from_numpy(clip.transpose(0, 4, 1, 2, 3).copy())).numpy()
    spec = EncoderSpec("r3d18", 512, 4, 32, norm="frozen_bn")
    ours = make_encoder(spec).apply({"params": params, "batch_stats": batch_stats}, clip)
    np.testing.assert_allclose(np.asarray(ours), expected, rtol=1e-4, atol=1e-4)


def test_timesformer_matches_hugging_faces_timesformermodel_on_the_same_random_weights():
    torch = pytest.importorskip("torch", reason="comparing with Hugging Face needs torch (pip install 'rlfit[torch]')")
    transformers = pytest.importorskip("transformers", reason="comparing with Hugging Face needs transformers")
    config = transformers.TimesformerConfig(image_size=TINY["image"], patch_size=TINY["patch"],
                                            num_frames=TINY["frames"], hidden_size=TINY["hidden"],
                                            num_hidden_layers=TINY["depth"], num_attention_heads=TINY["heads"],
                                            intermediate_size=4 * TINY["hidden"])
    torch.manual_seed(0)
    model = transformers.TimesformerModel(config).eval()
    with torch.no_grad():  # HF starts the time embeddings at zero; random embeddings check the token order
        for name, param in model.named_parameters():
            if name.startswith("embeddings."):
                param.normal_(0, 0.2)
    params = timesformer_from_hf_state_dict({k: v.detach().numpy() for k, v in model.state_dict().items()})
    clip = np.random.default_rng(7).uniform(0, 1, (2, 3, 16, 16, 3)).astype(np.float32)
    with torch.no_grad():
        expected = model(pixel_values=torch.from_numpy(clip.transpose(0, 1, 4, 2, 3).copy())).last_hidden_state[:, 0]
    ours = tiny_timesformer().apply({"params": params}, clip)
    np.testing.assert_allclose(np.asarray(ours), expected.numpy(), rtol=1e-4, atol=1e-4)
