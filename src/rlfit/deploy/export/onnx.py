"""ONNX export of a saved policy: observation normalization (or a pixel policy's encoder, see
`rlfit.deploy.export.onnx_encoders`), the MLP and the deterministic action of the policy's recorded action head
(`rlfit.networks.heads`), in one graph.

The model (opset 17, built with `onnx.helper`, float32):

    input   <key>   [batch, obs_dim]      the policy's observation entry ('state' for G1; 'obs' when the
                                          environment's observation is one array), raw as the environment gives it
    output  action  [batch, action_size]  the deterministic action in [-1, 1]
            (discrete heads: action [batch] int64, the most likely index, and logits or q_values [batch, K])

    x = (input - mean) / std                  running statistics saved with the policy
    x = act(x @ W_i + b_i)   for hidden i     act: the algorithm's activation (ppo.activation, sac.activation)
    y = x @ W_out + b_out
    action = tanh(y[:, :action_size])         tanh_gaussian (the mean half)
             tanh(y)                          deterministic_tanh
             argmax(y), y named logits        categorical
             argmax(y), y named q_values      q_argmax

Before the file is written, onnxruntime runs it on random observations and its actions must match
`rlfit.load_policy` (fp32) within 1e-4 (discrete: the same index wherever the two largest logits differ by
more than 1e-4); otherwise nothing is written.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from rlfit.errors import UserError
from rlfit.deploy.bundle.schema import Bundle, bundle_path, to_metadata, to_yaml
from rlfit.deploy.export.onnx_encoders import encoder_nodes
from rlfit.networks.heads import CATEGORICAL, DETERMINISTIC_TANH, Q_ARGMAX
from rlfit.deploy.policy_file import ARRAY_OBS_NAME, ENCODER_NETWORK_KIND, PolicyFiles, head_of
from rlfit.algos.common.normalizer import STD_MAX, STD_MIN

OPSET = 17
OUTPUT_NAME = "action"
LOGITS_NAME = "logits"
"""The second output of a categorical policy's model."""
Q_VALUES_NAME = "q_values"
"""The second output of a q_argmax policy's model."""
TOLERANCE = 1e-4
CHECK_SAMPLES = 256
CHECK_CLIPS = 16
"""Clips of frames in the check of a pixel policy (an R3D-18 forward pass on a CPU takes seconds a clip)."""


class ExportResult(NamedTuple):
    """What `export_onnx` wrote."""

    path: Path
    input_name: str
    input_shape: tuple[int, ...]
    """(obs_dim,), after the batch axis."""
    output_name: str
    action_size: int
    input_dtype: str
    """'float32' (a vector observation) or 'uint8' (camera frames)."""
    discrete: bool
    """Whether the action is an int64 index [batch] (else float32 [batch, action_size] in [-1, 1])."""
    max_abs_diff: float
    """Largest |onnxruntime - load_policy| over the check's random observations."""
    bundle: Path | None = None
    """The deployment bundle written beside the model (deploy.yaml), None when there is none."""
    bundle_note: str = ""
    """Why there is no bundle."""


def export_onnx(run_dir: Path, out: Path | None = None, checkpoint: str | None = None) -> ExportResult:
    """Exports RUN_DIR's policy (or a checkpoint's) to `out` (default RUN_DIR/policy.onnx) after checking it."""
    from rlfit.deploy.policy_file import load_policy, policy_location, read_policy_files

    source = policy_location(run_dir, checkpoint)
    out = Path(out) if out is not None else default_path(Path(run_dir), checkpoint)
    if not out.parent.is_dir():
        raise UserError(f"the folder of --out, {out.parent}, does not exist; create it first")
    files = read_policy_files(source)
    _onnx()  # the missing extra is named before the environment loads
    bundle, note = run_bundle(Path(run_dir), files)
    model = build_model(files, to_metadata(bundle) if bundle is not None else {})
    model_bytes = model.SerializeToString()
    policy = load_policy(source, precision="fp32")
    diff = max_abs_difference(model_bytes, policy, files)
    if not diff <= TOLERANCE:
        raise UserError(f"the ONNX model differs from rlfit.load_policy by {diff:.2e} (> {TOLERANCE:g}) on random "
                        "observations; nothing was written (please report this as a bug)")
    write_atomic(out, model_bytes)
    written = None
    if bundle is not None:
        written = bundle_path(out)
        write_atomic(written, to_yaml(bundle).encode())
    pixels = files.description["network"]["kind"] == ENCODER_NETWORK_KIND
    return ExportResult(out, input_name(files), tuple(files.description["observation"]["input_shape"]), OUTPUT_NAME,
                        int(files.description["action_size"]), "uint8" if pixels else "float32",
                        head_of(files.description).discrete, diff, written, note)


def run_bundle(run_dir: Path, files: PolicyFiles) -> tuple[Bundle | None, str]:
    """(the deployment bundle, why none) of a vector policy whose run folder holds its config."""
    from rlfit.deploy.bundle.build import bundle_of_run

    description = files.description
    if description["network"]["kind"] == ENCODER_NETWORK_KIND or head_of(description).discrete:
        return None, "deploy.yaml describes vector-observation policies with continuous actions"
    if not (run_dir / "config.yaml").is_file():
        return None, f"{run_dir} has no config.yaml to read the environment from"
    shape = [int(d) for d in description["observation"]["input_shape"]]
    return bundle_of_run(run_dir, input_name(files), int(np.prod(shape)))


def default_path(run_dir: Path, checkpoint: str | None) -> Path:
    suffix = f"-{int(checkpoint)}" if checkpoint and checkpoint.isdigit() else ""
    return run_dir / f"policy{suffix}.onnx"


def input_name(files: PolicyFiles) -> str:
    """The policy's observation key ('state'), or 'obs' for array observations."""
    return files.description["observation"]["policy_key"] or ARRAY_OBS_NAME


def normalization(files: PolicyFiles) -> tuple[np.ndarray, np.ndarray]:
    """(mean, std) [obs_dim] as `rlfit.algos.common.normalizer.normalize` applies them (0 and 1 before any data)."""
    if files.count <= 0:
        return np.zeros_like(files.mean, np.float32), np.ones_like(files.mean, np.float32)
    std = np.clip(np.sqrt(files.sum_sq_dev / max(files.count, 1.0)), STD_MIN, STD_MAX)
    return files.mean.astype(np.float32), std.astype(np.float32)


def build_model(files: PolicyFiles, metadata: dict[str, str] | None = None) -> Any:
    """The ONNX ModelProto of the deterministic policy (see module docstring); `metadata` (the deployment bundle's
    fields, `rlfit.deploy.bundle.schema.to_metadata`) joins its metadata_props."""
    onnx = _onnx()
    from onnx import TensorProto, helper, numpy_helper

    description = files.description
    network, action_size = description["network"], int(description["action_size"])
    name, input_shape = input_name(files), [int(d) for d in description["observation"]["input_shape"]]
    if network["kind"] == ENCODER_NETWORK_KIND:  # camera frames: the encoder's features feed the MLP
        encoder = {collection: tree["encoder"] for collection, tree in files.params.items() if "encoder" in tree}
        nodes, weights = encoder_nodes(network["encoder"], encoder, name, "h0")
        layers = files.params["params"]["head"]
        input_type, input_doc = TensorProto.UINT8, "camera frames [T, H, W, C], as the environment gives them"
    else:
        mean, std = normalization(files)
        weights = [numpy_helper.from_array(mean, "obs_mean"), numpy_helper.from_array(std, "obs_std")]
        nodes = [helper.make_node("Sub", [name, "obs_mean"], ["centered"]),
                 helper.make_node("Div", ["centered", "obs_std"], ["h0"])]
        layers = files.params["params"]
        input_type, input_doc = TensorProto.FLOAT, "raw observation, as the environment gives it"
    count = len(network["layer_sizes"])
    for index in range(count):
        layer = layers[f"dense_{index}"]
        weights += [numpy_helper.from_array(np.asarray(layer["kernel"], np.float32), f"W{index}"),
                    numpy_helper.from_array(np.asarray(layer["bias"], np.float32), f"b{index}")]
        nodes += [helper.make_node("MatMul", [f"h{index}", f"W{index}"], [f"z{index}"]),
                  helper.make_node("Add", [f"z{index}", f"b{index}"], [f"y{index}"])]
        if index < count - 1:
            nodes += activation_nodes(network["activation"], f"y{index}", f"h{index + 1}", f"act{index}")
    head_nodes, head_weights, outputs = action_nodes(head_of(description).name, f"y{count - 1}", action_size)
    nodes, weights = nodes + head_nodes, weights + head_weights
    graph = helper.make_graph(
        nodes, "rlfit_policy",
        [helper.make_tensor_value_info(name, input_type, ["batch", *input_shape], doc_string=input_doc)],
        outputs, initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="rlfit",
                              producer_version=str(description.get("rlfit_version", "")),
                              doc_string=f"rlfit policy for {description.get('env_name')}: {name} -> {OUTPUT_NAME}")
    model.ir_version = min(model.ir_version, 8)  # readable by onnxruntime releases of the last years
    helper.set_model_props(model, {"env_name": str(description.get("env_name")), "input": name,
                                   "output": OUTPUT_NAME, "action_size": str(action_size), **(metadata or {})})
    onnx.checker.check_model(model)
    return model


def action_nodes(head: str, y: str, action_size: int) -> tuple[list[Any], list[Any], list[Any]]:
    """(nodes, weights, graph outputs) turning the network's output `y` into the action of `head`."""
    from onnx import TensorProto, helper, numpy_helper

    if head in (CATEGORICAL, Q_ARGMAX):
        second, doc = ((LOGITS_NAME, "unnormalized log-probabilities of the actions") if head == CATEGORICAL else
                       (Q_VALUES_NAME, "the value of each action"))
        nodes = [helper.make_node("Identity", [y], [second]),
                 helper.make_node("ArgMax", [second], [OUTPUT_NAME], axis=1, keepdims=0)]
        return nodes, [], [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.INT64, ["batch"],
                                                         doc_string="the most likely action index"),
                           helper.make_tensor_value_info(second, TensorProto.FLOAT, ["batch", action_size],
                                                         doc_string=doc)]
    output = [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["batch", action_size],
                                            doc_string=f"deterministic action ({head}) in [-1, 1]")]
    if head == DETERMINISTIC_TANH:
        return [helper.make_node("Tanh", [y], [OUTPUT_NAME])], [], output
    # tanh_gaussian: tanh of the mean half
    weights = [numpy_helper.from_array(np.asarray(v, np.int64), n) for n, v in
               (("mean_start", [0]), ("mean_end", [action_size]), ("mean_axis", [1]))]
    nodes = [helper.make_node("Slice", [y, "mean_start", "mean_end", "mean_axis"], ["mean"]),
             helper.make_node("Tanh", ["mean"], [OUTPUT_NAME])]
    return nodes, weights, output


def activation_nodes(activation: str, x: str, out: str, prefix: str) -> list[Any]:
    """ONNX nodes computing flax's `activation` elementwise from tensor `x` into `out`."""
    from onnx import helper

    if activation == "swish":
        return [helper.make_node("Sigmoid", [x], [f"{prefix}_sigmoid"]),
                helper.make_node("Mul", [x, f"{prefix}_sigmoid"], [out])]
    if activation in ("relu", "tanh"):
        return [helper.make_node(activation.capitalize(), [x], [out])]
    if activation == "elu":
        return [helper.make_node("Elu", [x], [out], alpha=1.0)]
    if activation == "gelu":  # flax's default, the tanh approximation
        return _gelu_tanh_nodes(x, out, prefix)
    raise UserError(f"activation '{activation}' has no ONNX export; use swish, relu, tanh, elu or gelu")


def _gelu_tanh_nodes(x: str, out: str, prefix: str) -> list[Any]:
    """0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))."""
    from onnx import TensorProto, helper

    def constant(name: str, value: float) -> Any:
        return helper.make_node("Constant", [], [f"{prefix}_{name}"],
                                value=helper.make_tensor(f"{prefix}_{name}_value", TensorProto.FLOAT, [], [value]))

    p = prefix
    return [constant("c", 0.044715), constant("k", math.sqrt(2.0 / math.pi)), constant("half", 0.5),
            constant("one", 1.0),
            helper.make_node("Mul", [x, x], [f"{p}_x2"]), helper.make_node("Mul", [f"{p}_x2", x], [f"{p}_x3"]),
            helper.make_node("Mul", [f"{p}_x3", f"{p}_c"], [f"{p}_cx3"]),
            helper.make_node("Add", [x, f"{p}_cx3"], [f"{p}_inner"]),
            helper.make_node("Mul", [f"{p}_inner", f"{p}_k"], [f"{p}_scaled"]),
            helper.make_node("Tanh", [f"{p}_scaled"], [f"{p}_t"]),
            helper.make_node("Add", [f"{p}_t", f"{p}_one"], [f"{p}_1t"]),
            helper.make_node("Mul", [x, f"{p}_1t"], [f"{p}_x1t"]),
            helper.make_node("Mul", [f"{p}_x1t", f"{p}_half"], [out])]


def random_observations(files: PolicyFiles, samples: int | None = None, seed: int = 0) -> np.ndarray:
    """[samples, obs_dim] float32 around the saved statistics (mean + 3 * std * N(0, 1)); for a pixel policy
    uniformly random uint8 frames [samples, T, H, W, C]. Default samples: CHECK_SAMPLES, CHECK_CLIPS of frames."""
    if files.description["network"]["kind"] == ENCODER_NETWORK_KIND:
        shape = tuple(int(d) for d in files.description["observation"]["input_shape"])
        return np.random.default_rng(seed).integers(0, 256, (samples or CHECK_CLIPS, *shape), dtype=np.uint8)
    samples = samples or CHECK_SAMPLES
    mean, std = normalization(files)
    noise = np.random.default_rng(seed).standard_normal((samples, mean.shape[-1]))
    return (mean + 3.0 * std * noise).astype(np.float32)


def max_abs_difference(model_bytes: bytes, policy: Any, files: PolicyFiles) -> float:
    """max |onnxruntime(model) - policy| over `random_observations`; for a discrete head over the observations
    whose two largest ONNX outputs (logits, q_values) differ by more than TOLERANCE (elsewhere either index is
    right)."""
    try:
        import onnxruntime
    except ImportError:
        raise UserError("checking the export needs onnxruntime: pip install 'rlfit[export]'") from None
    session = onnxruntime.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    obs = random_observations(files)
    reference = np.asarray(policy.act(obs))
    head = head_of(files.description)
    if not head.discrete:
        (onnx_actions,) = session.run([OUTPUT_NAME], {input_name(files): obs})
        return float(np.max(np.abs(onnx_actions - reference)))
    second = LOGITS_NAME if head.name == CATEGORICAL else Q_VALUES_NAME
    onnx_actions, logits = session.run([OUTPUT_NAME, second], {input_name(files): obs})
    top_two = np.sort(logits, axis=-1)[:, -2:]
    decided = top_two[:, 1] - top_two[:, 0] > TOLERANCE
    return float(np.max(np.abs(onnx_actions - reference) * decided, initial=0.0))


def write_atomic(path: Path, data: bytes) -> None:
    """Writes `data` to `path` via a temporary file in the same folder and a rename."""
    handle, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        tmp.chmod(0o644)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise UserError("exporting to ONNX needs the onnx package: pip install 'rlfit[export]'") from None
    return onnx
