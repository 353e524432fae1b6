"""ONNX nodes for the encoders in front of a pixel policy's MLP (`network.kind` 'encoder_mlp').

simple2dcnn (the CPU default), as `rlfit.networks.simple2dcnn` computes it:

    input   pixels  [batch, T, H, W, C] uint8, as the environment gives it
    x = Cast(pixels) / 255, then (x - mean) / std per channel where the encoder spec has them
    x = [B, H, W, T*C] (frames stacked on channels) -> NCHW -> 4 x Relu(Conv 3x3, VALID; strides 2, 1, 1, 1)
    x = flatten in NHWC order -> Dense -> LayerNormalization(eps 1e-6) -> Tanh        [batch, features]

The other encoders (simple3dcnn, r3d18, timesformer) have no ONNX export yet: `encoder_nodes` refuses them in
one line.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlfit.errors import UserError

EXPORTED_ENCODERS = ("simple2dcnn",)
LAYER_NORM_EPSILON = 1e-6
"""flax.linen.LayerNorm's default epsilon."""


def encoder_nodes(spec: dict[str, Any], params: dict[str, Any], input_name: str, out: str) -> tuple[list, list]:
    """(nodes, initializers) computing the encoder's features `out` [batch, features] from `input_name`."""
    from onnx import TensorProto, helper, numpy_helper

    if spec["name"] not in EXPORTED_ENCODERS:
        raise UserError(f"ONNX export of the {spec['name']} encoder is not supported yet (only "
                        f"{', '.join(EXPORTED_ENCODERS)}); use the policy file with rlfit.load_policy instead")
    frames, size, channels = int(spec["frames"]), int(spec["image_size"]), int(spec["channels"])

    def const(name: str, value: Any, dtype: Any = np.float32) -> Any:
        return numpy_helper.from_array(np.asarray(value, dtype), name)

    inits = [const("enc_255", 255.0), const("enc_stacked_shape", [0, size, size, frames * channels], np.int64),
             const("enc_flat_shape", [0, -1], np.int64)]
    nodes = [helper.make_node("Cast", [input_name], ["enc_float"], to=TensorProto.FLOAT),
             helper.make_node("Div", ["enc_float", "enc_255"], ["enc_scaled"])]
    x = "enc_scaled"
    if spec.get("mean") is not None:
        inits += [const("enc_mean", spec["mean"]), const("enc_std", spec["std"])]
        nodes += [helper.make_node("Sub", [x, "enc_mean"], ["enc_centered"]),
                  helper.make_node("Div", ["enc_centered", "enc_std"], ["enc_normalized"])]
        x = "enc_normalized"
    nodes += [helper.make_node("Transpose", [x], ["enc_bhwtc"], perm=[0, 2, 3, 1, 4]),
              helper.make_node("Reshape", ["enc_bhwtc", "enc_stacked_shape"], ["enc_nhwc"]),
              helper.make_node("Transpose", ["enc_nhwc"], ["enc_c0"], perm=[0, 3, 1, 2])]
    for index, stride in enumerate((2, 1, 1, 1)):
        conv = params[f"conv_{index}"]
        kernel = np.transpose(np.asarray(conv["kernel"], np.float32), (3, 2, 0, 1))  # HWIO -> OIHW
        inits += [const(f"enc_conv{index}_w", kernel), const(f"enc_conv{index}_b", conv["bias"])]
        nodes += [helper.make_node("Conv", [f"enc_c{index}", f"enc_conv{index}_w", f"enc_conv{index}_b"],
                                   [f"enc_z{index}"], kernel_shape=[3, 3], strides=[stride, stride],
                                   pads=[0, 0, 0, 0]),
                  helper.make_node("Relu", [f"enc_z{index}"], [f"enc_c{index + 1}"])]
    inits += [const("enc_dense_w", params["dense"]["kernel"]), const("enc_dense_b", params["dense"]["bias"]),
              const("enc_norm_scale", params["norm"]["scale"]), const("enc_norm_bias", params["norm"]["bias"])]
    nodes += [helper.make_node("Transpose", ["enc_c4"], ["enc_last_nhwc"], perm=[0, 2, 3, 1]),
              helper.make_node("Reshape", ["enc_last_nhwc", "enc_flat_shape"], ["enc_flat"]),
              helper.make_node("MatMul", ["enc_flat", "enc_dense_w"], ["enc_dense_z"]),
              helper.make_node("Add", ["enc_dense_z", "enc_dense_b"], ["enc_dense"]),
              helper.make_node("LayerNormalization", ["enc_dense", "enc_norm_scale", "enc_norm_bias"], ["enc_ln"],
                               axis=-1, epsilon=LAYER_NORM_EPSILON),
              helper.make_node("Tanh", ["enc_ln"], [out])]
    return nodes, inits
