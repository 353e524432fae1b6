"""The exported policy as deployment runs it: the ONNX file through onnxruntime, checked against the run first.

The file `rlfit export` writes (`rlfit.deploy.export.onnx`) has one float32 input named after the policy's
observation entry ('state', or 'obs' for an array observation), [batch, obs_dim], and a float32 output 'action'
[batch, action_size]. `load_onnx_policy` refuses, in one line and before anything runs, a file whose input, output
or recorded environment disagree with the run's environment (a file exported from another run).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlfit.deploy.policy_file import ARRAY_OBS_NAME
from rlfit.errors import UserError

__all__ = ["ARRAY_OBS_NAME", "ONNX_FILE", "OnnxPolicy", "load_onnx_policy", "onnx_path"]

ONNX_FILE = "policy.onnx"
"""Where `rlfit export RUN_DIR` writes the model, and where the transfer check looks for it by default."""
ACTION_OUTPUT = "action"


@dataclass(frozen=True)
class OnnxPolicy:
    """An onnxruntime session of an exported policy: `policy(obs) -> action [action_size]` for one observation."""

    path: Path
    session: Any
    """onnxruntime.InferenceSession on the CPU."""
    input_name: str
    """The observation entry it reads ('state'), or 'obs' for an array observation."""
    obs_size: int
    action_size: int

    def __call__(self, obs: Any) -> np.ndarray:
        """The deterministic action [action_size] float32 for one observation (a dict holds `input_name`)."""
        entry = obs[self.input_name] if isinstance(obs, dict) else obs
        batch = np.asarray(entry, np.float32).reshape(1, self.obs_size)
        (action,) = self.session.run([ACTION_OUTPUT], {self.input_name: batch})
        return np.asarray(action, np.float32)[0]


def onnx_path(run_dir: Path, given: Path | None) -> Path:
    """--onnx, or RUN_DIR/policy.onnx; a UserError saying how to make it when it is absent."""
    path = Path(given) if given is not None else Path(run_dir) / ONNX_FILE
    if not path.is_file():
        if given is not None:
            raise UserError(f"--onnx {path} does not exist; give the file `rlfit export` wrote")
        raise UserError(f"{run_dir} has no exported policy ({ONNX_FILE}); run `rlfit export {run_dir}` first "
                        "(it needs pip install 'rlfit[export]')")
    return path


def load_onnx_policy(path: Path, env_name: str, obs_sizes: dict[str, int], action_size: int) -> OnnxPolicy:
    """The model at `path` as an OnnxPolicy, after checking it against the run: its input is one of the
    environment's observation entries (`obs_sizes`: entry -> size, {'obs': size} for an array observation) at
    that size, its output 'action' is float32 [batch, action_size], and the environment it records is `env_name`.
    Anything else is a one-line UserError."""
    try:
        import onnxruntime
    except ImportError:
        raise UserError("the transfer check runs the exported policy with onnxruntime: pip install 'rlfit[export]'") \
            from None
    try:
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime raises its own exception types for a file it cannot read  # noqa: BLE001
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UserError(f"{path} is not an ONNX model onnxruntime can load ({first}); export it again with "
                        "`rlfit export RUN_DIR`") from None
    recorded = session.get_modelmeta().custom_metadata_map.get("env_name")
    if recorded not in (None, "", "None", env_name):
        raise UserError(f"{path} was exported from a policy for {recorded}, but the run is {env_name}; pass the "
                        "run's own file (`rlfit export RUN_DIR`)")
    input_name, obs_size = _check_input(session, path, obs_sizes)
    _check_output(session, path, action_size)
    return OnnxPolicy(Path(path), session, input_name, obs_size, action_size)


def _check_input(session: Any, path: Path, obs_sizes: dict[str, int]) -> tuple[str, int]:
    inputs = session.get_inputs()
    sizes = ", ".join(f"'{name}' [{size}]" for name, size in obs_sizes.items())
    if len(inputs) != 1 or inputs[0].type != "tensor(float)" or len(inputs[0].shape) != 2:
        found = ", ".join(f"'{i.name}' {i.type} {i.shape}" for i in inputs)
        raise UserError(f"{path} takes {found}, but the transfer check feeds one float32 observation [batch, size] "
                        f"of the run's ({sizes}); export the run's policy with `rlfit export RUN_DIR`")
    name, size = inputs[0].name, inputs[0].shape[1]
    if name not in obs_sizes or size != obs_sizes[name]:
        raise UserError(f"{path} takes observation '{name}' of size {size}, but the run's environment gives {sizes}: "
                        "the file comes from another run; pass the run's own (`rlfit export RUN_DIR`)")
    return name, int(size)


def _check_output(session: Any, path: Path, action_size: int) -> None:
    outputs = {output.name: output for output in session.get_outputs()}
    action = outputs.get(ACTION_OUTPUT)
    if action is None:
        raise UserError(f"{path} has no output '{ACTION_OUTPUT}' (it has {', '.join(outputs)}); it was not written "
                        "by `rlfit export`")
    shape = list(action.shape)
    if action.type != "tensor(float)" or len(shape) != 2 or shape[1] != action_size:
        raise UserError(f"{path} outputs '{ACTION_OUTPUT}' {action.type} {shape}, but the run's environment takes "
                        f"float32 actions [batch, {action_size}] (a continuous action head): the file comes from "
                        "another run; pass the run's own (`rlfit export RUN_DIR`)")
