"""ONNX nodes for the encoders in front of a pixel policy's MLP (`network.kind` 'encoder_mlp').

Every exported encoder starts and ends alike, as rlfit's Flax modules compute them:

    input   pixels  [batch, T, H, W, C] uint8, as the environment gives it
    x = Cast(pixels) / 255, then (x - mean) / std per channel where the encoder spec has them
    ... the encoder's convolutions ...
    x = flatten in Flax's (channels-last) order -> Dense -> LayerNormalization(eps 1e-6) -> Tanh   [batch, features]

simple2dcnn (the CPU default): [B, H, W, T*C] (frames stacked on channels) -> NCHW -> 4 x Relu(Conv 3x3, VALID;
strides 2, 1, 1, 1). simple3dcnn: NCDHW -> 3 x Relu(Conv 3x3x3, SAME padded as XLA pads it; strides (1, 2, 2),
(1, 2, 2), (2, 2, 2)).

r3d18 ends differently: NCDHW -> the stem and four stages of two basic blocks (Conv3d without bias, then the
normalization: BatchNormalization with the frozen statistics, or GroupNorm(32) written as a mean and variance
over each group, then the per-channel scale and bias), residual Add, Relu -> ReduceMean over T, H, W -> [B, 512]
(-> the projection's MatMul + Add when `features` != 512). timesformer ends with its final CLS token (projected
when `features` != hidden): the patch Conv (stride = patch), position and time embeddings, then per layer the
temporal attention over each patch's frames, the spatial attention over each frame's patches and its copy of the
CLS token (the copies' results averaged), and the MLP with the exact (erf) GELU; LayerNormalization (eps 1e-6)
before each, multi-head attention as MatMul, Softmax, MatMul (`_timesformer`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from rlfit.errors import UserError

EXPORTED_ENCODERS = ("simple2dcnn", "simple3dcnn", "r3d18", "timesformer")
LAYER_NORM_EPSILON = 1e-6
"""flax.linen.LayerNorm's default epsilon."""


def encoder_nodes(spec: dict[str, Any], variables: dict[str, Any], input_name: str, out: str) -> tuple[list, list]:
    """(nodes, initializers) computing the encoder's features `out` [batch, features] from `input_name`;
    `variables` are the encoder's collections ({'params': ..., and r3d18's frozen 'batch_stats'})."""
    from onnx import TensorProto, helper

    if spec["name"] not in EXPORTED_ENCODERS:
        raise UserError(f"ONNX export of the {spec['name']} encoder is not supported yet (only "
                        f"{', '.join(EXPORTED_ENCODERS)}); use the policy file with rlfit.load_policy instead")
    inits = [_const("enc_255", 255.0)]
    nodes = [helper.make_node("Cast", [input_name], ["enc_float"], to=TensorProto.FLOAT),
             helper.make_node("Div", ["enc_float", "enc_255"], ["enc_scaled"])]
    x = "enc_scaled"
    if spec.get("mean") is not None:
        inits += [_const("enc_mean", spec["mean"]), _const("enc_std", spec["std"])]
        nodes += [helper.make_node("Sub", [x, "enc_mean"], ["enc_centered"]),
                  helper.make_node("Div", ["enc_centered", "enc_std"], ["enc_normalized"])]
        x = "enc_normalized"
    if spec["name"] in ("r3d18", "timesformer"):
        body = _r3d18 if spec["name"] == "r3d18" else _timesformer
        body_nodes, body_inits = body(spec, variables, x, out)
        return nodes + body_nodes, inits + body_inits
    params = variables["params"]
    body = _simple2dcnn if spec["name"] == "simple2dcnn" else _simple3dcnn
    body_nodes, body_inits = body(spec, params, x, "enc_channels_last")
    inits += body_inits + [_const("enc_flat_shape", [0, -1], np.int64),
                           _const("enc_dense_w", params["dense"]["kernel"]),
                           _const("enc_dense_b", params["dense"]["bias"]),
                           _const("enc_norm_scale", params["norm"]["scale"]),
                           _const("enc_norm_bias", params["norm"]["bias"])]
    nodes += body_nodes + [
        helper.make_node("Reshape", ["enc_channels_last", "enc_flat_shape"], ["enc_flat"]),
        helper.make_node("MatMul", ["enc_flat", "enc_dense_w"], ["enc_dense_z"]),
        helper.make_node("Add", ["enc_dense_z", "enc_dense_b"], ["enc_dense"]),
        helper.make_node("LayerNormalization", ["enc_dense", "enc_norm_scale", "enc_norm_bias"], ["enc_ln"],
                         axis=-1, epsilon=LAYER_NORM_EPSILON),
        helper.make_node("Tanh", ["enc_ln"], [out])]
    return nodes, inits


def _const(name: str, value: Any, dtype: Any = np.float32) -> Any:
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(value, dtype), name)


def _conv(name: str, x: str, layer: dict[str, Any], strides: tuple[int, ...], pads: list[int],
          out: str) -> tuple[list, list]:
    """Conv(x) with the Flax kernel [*spatial, I, O] as ONNX's [O, I, *spatial] (and the bias, if the layer
    has one); pads [begin per axis..., end per axis...]."""
    from onnx import helper

    kernel = np.asarray(layer["kernel"], np.float32)
    spatial = kernel.ndim - 2
    inits = [_const(f"{name}_w", np.transpose(kernel, (spatial + 1, spatial, *range(spatial))))]
    inputs = [x, f"{name}_w"]
    if "bias" in layer:
        inits.append(_const(f"{name}_b", layer["bias"]))
        inputs.append(f"{name}_b")
    node = helper.make_node("Conv", inputs, [out], kernel_shape=list(kernel.shape[:spatial]), strides=list(strides),
                            pads=pads)
    return [node], inits


def _conv_relu(index: int, x: str, params: dict[str, Any], strides: tuple[int, ...], pads: list[int],
               out: str) -> tuple[list, list]:
    """Relu(Conv(x)) of the layer `conv_<index>`."""
    from onnx import helper

    nodes, inits = _conv(f"enc_conv{index}", x, params[f"conv_{index}"], strides, pads, f"enc_z{index}")
    return nodes + [helper.make_node("Relu", [f"enc_z{index}"], [out])], inits


def _simple2dcnn(spec: dict[str, Any], params: dict[str, Any], x: str, out: str) -> tuple[list, list]:
    """[B, T, H, W, C] -> the last convolution's maps [B, H', W', 32] (channels last, as Flax flattens them)."""
    from onnx import helper

    frames, size, channels = int(spec["frames"]), int(spec["image_size"]), int(spec["channels"])
    inits = [_const("enc_stacked_shape", [0, size, size, frames * channels], np.int64)]
    nodes = [helper.make_node("Transpose", [x], ["enc_bhwtc"], perm=[0, 2, 3, 1, 4]),
             helper.make_node("Reshape", ["enc_bhwtc", "enc_stacked_shape"], ["enc_nhwc"]),
             helper.make_node("Transpose", ["enc_nhwc"], ["enc_c0"], perm=[0, 3, 1, 2])]
    for index, stride in enumerate((2, 1, 1, 1)):
        layer_nodes, layer_inits = _conv_relu(index, f"enc_c{index}", params, (stride, stride), [0, 0, 0, 0],
                                              f"enc_c{index + 1}")
        nodes, inits = nodes + layer_nodes, inits + layer_inits
    return nodes + [helper.make_node("Transpose", ["enc_c4"], [out], perm=[0, 2, 3, 1])], inits


def _simple3dcnn(spec: dict[str, Any], params: dict[str, Any], x: str, out: str) -> tuple[list, list]:
    """[B, T, H, W, C] -> the last convolution's maps [B, T', H', W', 32] (channels last)."""
    import jax
    from onnx import helper

    from rlfit.networks.simple3dcnn import LAYERS

    sizes = [int(spec["frames"]), int(spec["image_size"]), int(spec["image_size"])]
    nodes, inits = [helper.make_node("Transpose", [x], ["enc_c0"], perm=[0, 4, 1, 2, 3])], []
    for index, (_, strides) in enumerate(LAYERS):
        low_high = jax.lax.padtype_to_pads(sizes, (3, 3, 3), strides, "SAME")  # as the Flax module pads
        pads = [low for low, _ in low_high] + [high for _, high in low_high]
        layer_nodes, layer_inits = _conv_relu(index, f"enc_c{index}", params, strides, pads, f"enc_c{index + 1}")
        nodes, inits = nodes + layer_nodes, inits + layer_inits
        sizes = [-(-n // s) for n, s in zip(sizes, strides)]
    return nodes + [helper.make_node("Transpose", [f"enc_c{len(LAYERS)}"], [out], perm=[0, 2, 3, 4, 1])], inits


def _norm(prefix: str, x: str, params: dict[str, Any], stats: dict[str, Any] | None, norm: str, channels: int,
          out: str) -> tuple[list, list]:
    """R3D-18's normalization of x [B, C, T, H, W]: frozen batch norm (`stats` its statistics), or GroupNorm(32)
    as Flax computes it (a mean and a variance over each group of channels, then the per-channel scale, bias)."""
    from onnx import helper

    from rlfit.networks.r3d18 import BN_EPS

    if norm == "frozen_bn":
        inits = [_const(f"{prefix}_{k}", v) for k, v in (("scale", params["scale"]), ("bias", params["bias"]),
                                                          ("mean", stats["mean"]), ("var", stats["var"]))]
        return [helper.make_node("BatchNormalization", [x] + [i.name for i in inits], [out], epsilon=BN_EPS)], inits
    groups, p = 32, prefix
    inits = [_const(f"{p}_grouped", [0, groups, -1], np.int64), _const(f"{p}_eps", BN_EPS),
             _const(f"{p}_scale", np.reshape(params["scale"], (channels, 1, 1, 1))),
             _const(f"{p}_bias", np.reshape(params["bias"], (channels, 1, 1, 1)))]
    nodes = [helper.make_node("Shape", [x], [f"{p}_shape"]),
             helper.make_node("Reshape", [x, f"{p}_grouped"], [f"{p}_g"]),
             helper.make_node("ReduceMean", [f"{p}_g"], [f"{p}_mean"], axes=[2], keepdims=1),
             helper.make_node("Sub", [f"{p}_g", f"{p}_mean"], [f"{p}_centered"]),
             helper.make_node("Mul", [f"{p}_centered", f"{p}_centered"], [f"{p}_squared"]),
             helper.make_node("ReduceMean", [f"{p}_squared"], [f"{p}_var"], axes=[2], keepdims=1),
             helper.make_node("Add", [f"{p}_var", f"{p}_eps"], [f"{p}_var_eps"]),
             helper.make_node("Sqrt", [f"{p}_var_eps"], [f"{p}_std"]),
             helper.make_node("Div", [f"{p}_centered", f"{p}_std"], [f"{p}_normed"]),
             helper.make_node("Reshape", [f"{p}_normed", f"{p}_shape"], [f"{p}_unscaled"]),
             helper.make_node("Mul", [f"{p}_unscaled", f"{p}_scale"], [f"{p}_scaled"]),
             helper.make_node("Add", [f"{p}_scaled", f"{p}_bias"], [out])]
    return nodes, inits


def _r3d18(spec: dict[str, Any], variables: dict[str, Any], x: str, out: str) -> tuple[list, list]:
    """[B, T, H, W, 3] -> R3D-18's pooled (and projected) features `out`."""
    from onnx import helper

    from rlfit.networks.r3d18 import BLOCKS_PER_STAGE, STAGES, WIDTH

    norm = spec.get("norm") or "group"
    params, stats = variables["params"], variables.get("batch_stats")

    def conv_norm(conv: str, norm_name: str, x: str, channels: int, pads: list[int], strides, out: str):
        """Conv then the normalization; `conv`, `norm_name` are '/'-joined paths in the variables."""
        prefix = f"enc_{conv.replace('/', '_')}"
        conv_nodes, conv_inits = _conv(prefix, x, _pick(params, conv), strides, pads, f"{prefix}_z")
        norm_nodes, norm_inits = _norm(f"enc_{norm_name.replace('/', '_')}", f"{prefix}_z", _pick(params, norm_name),
                                       _pick(stats, norm_name) if norm == "frozen_bn" else None, norm, channels, out)
        return conv_nodes + norm_nodes, conv_inits + norm_inits

    nodes = [helper.make_node("Transpose", [x], ["enc_x0"], perm=[0, 4, 1, 2, 3])]
    stem_nodes, inits = conv_norm("stem_conv", "stem_norm", "enc_x0", 64, [1, 3, 3, 1, 3, 3], (1, 2, 2),
                                  "enc_stem_normed")
    nodes += stem_nodes + [helper.make_node("Relu", ["enc_stem_normed"], ["enc_stem"])]
    x, in_channels = "enc_stem", 64
    for stage, (channels, stage_stride) in enumerate(STAGES, start=1):
        for block in range(BLOCKS_PER_STAGE):
            name, stride = f"layer{stage}_{block}", (stage_stride if block == 0 else 1)
            n1, i1 = conv_norm(f"{name}/conv1", f"{name}/norm1", x, channels, [1] * 6, (stride,) * 3, f"enc_{name}_n1")
            n2, i2 = conv_norm(f"{name}/conv2", f"{name}/norm2", f"enc_{name}_h", channels, [1] * 6, (1, 1, 1),
                               f"enc_{name}_n2")
            nodes += n1 + [helper.make_node("Relu", [f"enc_{name}_n1"], [f"enc_{name}_h"])] + n2
            inits += i1 + i2
            shortcut = x
            if stride != 1 or in_channels != channels:
                n3, i3 = conv_norm(f"{name}/downsample_conv", f"{name}/downsample_norm", x, channels, [0] * 6,
                                   (stride,) * 3, f"enc_{name}_shortcut")
                nodes, inits, shortcut = nodes + n3, inits + i3, f"enc_{name}_shortcut"
            nodes += [helper.make_node("Add", [f"enc_{name}_n2", shortcut], [f"enc_{name}_sum"]),
                      helper.make_node("Relu", [f"enc_{name}_sum"], [f"enc_{name}_out"])]
            x, in_channels = f"enc_{name}_out", channels
    pooled = out if int(spec["features"]) == WIDTH else "enc_pooled"
    nodes.append(helper.make_node("ReduceMean", [x], [pooled], axes=[2, 3, 4], keepdims=0))
    if pooled != out:
        projection = params["projection"]
        inits += [_const("enc_projection_w", projection["kernel"]), _const("enc_projection_b", projection["bias"])]
        nodes += [helper.make_node("MatMul", [pooled, "enc_projection_w"], ["enc_projected"]),
                  helper.make_node("Add", ["enc_projected", "enc_projection_b"], [out])]
    return nodes, inits


def _pick(tree: dict[str, Any], path: str) -> Any:
    for key in path.split("/"):
        tree = tree[key]
    return tree


class _Builder:
    """Nodes and initializers with generated names (`enc_tf<n>`), for the longer graphs."""

    def __init__(self, prefix: str):
        self.prefix, self.count, self.nodes, self.inits = prefix, 0, [], []

    def name(self) -> str:
        self.count += 1
        return f"{self.prefix}{self.count}"

    def const(self, value: Any, dtype: Any = np.float32) -> str:
        name = self.name()
        self.inits.append(_const(name, value, dtype))
        return name

    def shape(self, *dims: int) -> str:
        return self.const(list(dims), np.int64)

    def op(self, op_type: str, *inputs: str, out: str | None = None, **attributes: Any) -> str:
        from onnx import helper

        out = out or self.name()
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attributes))
        return out

    def dense(self, x: str, layer: dict[str, Any], out: str | None = None) -> str:
        return self.op("Add", self.op("MatMul", x, self.const(layer["kernel"])), self.const(layer["bias"]), out=out)

    def layer_norm(self, x: str, layer: dict[str, Any]) -> str:
        return self.op("LayerNormalization", x, self.const(layer["scale"]), self.const(layer["bias"]), axis=-1,
                       epsilon=LAYER_NORM_EPSILON)

    def slice(self, x: str, start: int, end: int, axis: int) -> str:
        return self.op("Slice", x, self.shape(start), self.shape(end), self.shape(axis))


class _TokenShape(NamedTuple):
    """TimeSformer's token grid: T frames of N patches, D wide, attention in `heads` heads."""

    frames: int
    patches: int
    width: int
    heads: int


def _timesformer(spec: dict[str, Any], variables: dict[str, Any], x: str, out: str) -> tuple[list, list]:
    """[B, T, S, S, C] (scaled and normalized) -> TimeSformer's final CLS token [B, features], as
    `rlfit.networks.timesformer.TimeSformer` computes it (see its docstring for the token layout)."""
    from rlfit.networks.timesformer import PRESETS

    preset = PRESETS[spec.get("preset") or "small"]
    size, channels, patch = int(spec["image_size"]), int(spec["channels"]), preset.patch_size
    shape = _TokenShape(int(spec["frames"]), (size // patch) ** 2, preset.hidden, preset.heads)
    params = variables["params"]
    g = _Builder("enc_tf")
    tokens, batch = _tf_embeddings(g, params["embeddings"], x, shape, size, channels, patch)
    for index in range(preset.depth):
        tokens = _tf_layer(g, params[f"layer_{index}"], tokens, batch, shape)
    cls = g.op("Gather", tokens, g.const(0, np.int64), axis=1)  # [B, D]
    if "projection" in params:
        g.dense(g.layer_norm(cls, params["layernorm"]), params["projection"], out=out)
    else:
        g.op("LayerNormalization", cls, g.const(params["layernorm"]["scale"]), g.const(params["layernorm"]["bias"]),
             axis=-1, epsilon=LAYER_NORM_EPSILON, out=out)
    return g.nodes, g.inits


def _tf_embeddings(g: _Builder, embeddings: dict[str, Any], x: str, shape: _TokenShape, size: int, channels: int,
                   patch: int) -> tuple[str, str]:
    """The tokens [B, 1 + N*T, D] (CLS first) and the batch size [B]:
    [B*T, C, S, S] -> Conv -> [B, T, N, D] (+ position) -> [B, N, T, D] (+ time) -> [B, N*T, D]."""
    frames, patches, width = shape.frames, shape.patches, shape.width
    nchw = g.op("Transpose", g.op("Reshape", x, g.shape(-1, size, size, channels)), perm=[0, 3, 1, 2])
    conv_nodes, conv_inits = _conv("enc_tf_patch", nchw, embeddings["patch_projection"], (patch, patch),
                                   [0, 0, 0, 0], "enc_tf_patches")
    g.nodes += conv_nodes
    g.inits += conv_inits
    tokens = g.op("Reshape", g.op("Transpose", "enc_tf_patches", perm=[0, 2, 3, 1]), g.shape(-1, frames, patches, width))
    position = np.asarray(embeddings["position_embeddings"], np.float32)[0]  # [N + 1, D]
    tokens = g.op("Add", tokens, g.const(position[1:]))
    tokens = g.op("Add", g.op("Transpose", tokens, perm=[0, 2, 1, 3]),
                  g.const(np.asarray(embeddings["time_embeddings"], np.float32)[0]))
    tokens = g.op("Reshape", tokens, g.shape(0, patches * frames, width))
    batch = g.slice(g.op("Shape", tokens), 0, 1, 0)  # [B]
    cls = np.asarray(embeddings["cls_token"], np.float32) + position[None, :1]  # [1, 1, D]
    cls = g.op("Expand", g.const(cls), g.op("Concat", batch, g.shape(1, width), axis=0))
    return g.op("Concat", cls, tokens, axis=1), batch  # [B, 1 + N*T, D]


def _tf_layer(g: _Builder, layer: dict[str, Any], tokens: str, batch: str, shape: _TokenShape) -> str:
    """One layer on the tokens [B, 1 + N*T, D]: temporal attention, spatial attention (with each frame's copy of
    the CLS token, the copies' results averaged), then the MLP with the exact GELU."""
    frames, patches, width = shape.frames, shape.patches, shape.width
    end = np.iinfo(np.int64).max
    cls, rest = g.slice(tokens, 0, 1, 1), g.slice(tokens, 1, end, 1)
    temporal = g.op("Reshape", rest, g.shape(-1, frames, width))  # [B*N, T, D]
    temporal = _tf_attention(g, g.layer_norm(temporal, layer["temporal_layernorm"]), layer["temporal_attention"],
                             shape)
    temporal = g.dense(g.op("Reshape", temporal, g.shape(-1, patches * frames, width)), layer["temporal_dense"])
    rest = g.op("Add", rest, temporal)
    spatial = g.op("Transpose", g.op("Reshape", rest, g.shape(-1, patches, frames, width)), perm=[0, 2, 1, 3])
    spatial = g.op("Reshape", spatial, g.shape(-1, patches, width))  # [B*T, N, D]
    copies = g.op("Expand", g.op("Unsqueeze", cls, g.shape(1)), g.op("Concat", batch, g.shape(frames, 1, width),
                                                                          axis=0))
    spatial = g.op("Concat", g.op("Reshape", copies, g.shape(-1, 1, width)), spatial, axis=1)  # [B*T, 1 + N, D]
    spatial = _tf_attention(g, g.layer_norm(spatial, layer["layernorm_before"]), layer["attention"], shape)
    cls_residual = g.op("ReduceMean", g.op("Reshape", g.slice(spatial, 0, 1, 1), g.shape(-1, frames, width)),
                        axes=[1], keepdims=1)  # [B, 1, D]
    residual = g.op("Reshape", g.slice(spatial, 1, end, 1), g.shape(-1, frames, patches, width))
    residual = g.op("Reshape", g.op("Transpose", residual, perm=[0, 2, 1, 3]), g.shape(-1, patches * frames, width))
    tokens = g.op("Concat", g.op("Add", cls, cls_residual), g.op("Add", rest, residual), axis=1)
    hidden = g.dense(g.layer_norm(tokens, layer["layernorm_after"]), layer["intermediate"])
    gelu = g.op("Mul", g.op("Mul", hidden, g.const(0.5)),  # exact GELU: x/2 (1 + erf(x / sqrt 2))
                g.op("Add", g.const(1.0), g.op("Erf", g.op("Div", hidden, g.const(np.sqrt(2.0))))))
    return g.op("Add", tokens, g.dense(gelu, layer["output"]))


def _tf_attention(g: _Builder, x: str, layer: dict[str, Any], shape: _TokenShape) -> str:
    """[L, S, D] -> [L, S, D]: softmax(q k^T / sqrt(D / heads)) v per head, then the output Dense."""
    width, heads = shape.width, shape.heads
    head = width // heads
    qkv = g.op("Reshape", g.dense(x, layer["qkv"]), g.shape(0, 0, 3, heads, head))
    query, key, value = (g.op("Gather", qkv, g.const(index, np.int64), axis=2) for index in range(3))
    logits = g.op("MatMul", g.op("Transpose", query, perm=[0, 2, 1, 3]), g.op("Transpose", key, perm=[0, 2, 3, 1]))
    weights = g.op("Softmax", g.op("Mul", logits, g.const(head ** -0.5)), axis=-1)
    context = g.op("MatMul", weights, g.op("Transpose", value, perm=[0, 2, 1, 3]))  # [L, heads, S, head]
    context = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), g.shape(0, 0, width))
    return g.dense(context, layer["output"])
