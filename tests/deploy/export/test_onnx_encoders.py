"""Each exported encoder's ONNX graph against the Flax module it was trained as (onnxruntime vs flax, 1e-5)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.deploy.export.onnx_encoders import EXPORTED_ENCODERS, encoder_nodes
from rlfit.networks.encoders import EncoderSpec, make_encoder

onnxruntime = pytest.importorskip("onnxruntime", reason="needs the export extra: pip install 'rlfit[export]'")

SPECS = {
    "simple2dcnn": EncoderSpec("simple2dcnn", features=6, frames=3, image_size=20, channels=3),
    "simple3dcnn": EncoderSpec("simple3dcnn", features=6, frames=5, image_size=18, channels=2,
                               mean=(0.4, 0.5), std=(0.2, 0.3)),
    "r3d18": EncoderSpec("r3d18", features=6, frames=4, image_size=16, channels=3, norm="group"),
    "timesformer": EncoderSpec("timesformer", features=6, frames=3, image_size=16, channels=3, preset="small",
                               mean=(0.45, 0.45, 0.45), std=(0.225, 0.225, 0.225)),
    "timesformer unprojected": EncoderSpec("timesformer", features=128, frames=2, image_size=8, channels=1,
                                           preset="small"),
    "r3d18 frozen_bn": EncoderSpec("r3d18", features=512, frames=4, image_size=16, channels=3, norm="frozen_bn",
                                   mean=(0.43216, 0.394666, 0.37645), std=(0.22803, 0.22145, 0.216989)),
}


def encoder_model(spec: EncoderSpec, variables) -> bytes:
    from onnx import TensorProto, helper

    nodes, inits = encoder_nodes(spec.to_dict(), variables, "pixels", "features")
    graph = helper.make_graph(
        nodes, "encoder", [helper.make_tensor_value_info("pixels", TensorProto.UINT8, ["batch", *spec.input_shape(1)[1:]])],
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", spec.features])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = min(model.ir_version, 8)
    return model.SerializeToString()


def test_every_exported_encoder_is_tested():
    assert {spec.name for spec in SPECS.values()} == set(EXPORTED_ENCODERS)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_onnx_encoder_computes_the_flax_encoders_features(name):
    spec = SPECS[name]
    module = make_encoder(spec, conv_impl="native")
    frames = np.random.default_rng(0).integers(0, 256, spec.input_shape(4), dtype=np.uint8)
    # init and apply each compiled whole (run op by op, R3D-18's dozens of layers compiled a program per operation)
    variables = jax.jit(module.init)(jax.random.PRNGKey(1), jnp.asarray(frames[:1]))
    rng = np.random.default_rng(2)

    # non-zero biases and statistics, so that a misplaced one cannot hide (variances and scales near 1)
    def perturbed(path, x):
        noise = 0.05 * rng.standard_normal(x.shape, dtype=np.float32)
        name = str(getattr(path[-1], "key", path[-1]))
        return 1.0 + np.abs(noise) if name in ("var", "scale") else np.asarray(x) + noise

    variables = jax.tree_util.tree_map_with_path(perturbed, variables)
    expected = np.asarray(jax.jit(module.apply)(variables, jnp.asarray(frames)))
    session = onnxruntime.InferenceSession(encoder_model(spec, variables),
                                           providers=["CPUExecutionProvider"])
    (features,) = session.run(["features"], {"pixels": frames})
    assert features.shape == (4, spec.features)
    # within 1e-5 of the features' scale: R3D-18's unnormalized pooled features reach hundreds, and two fp32
    # implementations of 17 convolutions (sums of up to 13,824 products) differ in the last digits there
    np.testing.assert_allclose(features, expected, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(expected).max())))
