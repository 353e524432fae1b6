"""PyTorch checkpoints (torchvision r3d_18, Hugging Face TimeSformer) -> rlfit safetensors encoder weights.

The mapping functions are pure numpy: a state dict {name: array in torch layout} -> Flax variables. Only
`convert_weights` touches files: it reads a `.safetensors` checkpoint directly and anything else (a `.pth`/`.bin`
pickle) with `torch.load(..., weights_only=True)`, torch's loader that refuses to run code, never plain pickle.
torch is needed only for those pickle files; transformers and torchvision are never needed.

Layouts: Conv3d weight [O, I, D, H, W] -> kernel [D, H, W, I, O]; Conv2d [O, I, H, W] -> [H, W, I, O];
Linear [out, in] -> kernel [in, out]; BatchNorm weight/bias/running_mean/running_var -> params scale/bias and
batch_stats mean/var (num_batches_tracked dropped); LayerNorm weight/bias -> scale/bias.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlfit.errors import UserError

KINDS = ("r3d18", "timesformer")
TIMESFORMER_MEAN = (0.45, 0.45, 0.45)
TIMESFORMER_STD = (0.225, 0.225, 0.225)
"""The input normalization of facebook/timesformer-* (their preprocessor_config.json), used when the checkpoint
has no preprocessor_config.json beside it."""

_BN = {"weight": ("params", "scale"), "bias": ("params", "bias"),
       "running_mean": ("batch_stats", "mean"), "running_var": ("batch_stats", "var")}
_R3D_MODULES = {"conv1.0": "conv1", "conv1.1": "norm1", "conv2.0": "conv2", "conv2.1": "norm2",
                "downsample.0": "downsample_conv", "downsample.1": "downsample_norm"}
_R3D_KEY = re.compile(r"^(?:stem\.(?P<stem>[01])|layer(?P<stage>[1-4])\.(?P<block>\d+)\.(?P<module>conv[12]\.[01]|"
                      r"downsample\.[01]))\.(?P<leaf>weight|bias|running_mean|running_var|num_batches_tracked)$")


def _put(tree: dict[str, Any], path: tuple[str, ...], value: np.ndarray) -> None:
    for part in path[:-1]:
        tree = tree.setdefault(part, {})
    tree[path[-1]] = value


def _strip(state_dict: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    if state_dict and all(key.startswith(prefix) for key in state_dict):
        return {key[len(prefix):]: value for key, value in state_dict.items()}
    return dict(state_dict)


def r3d18_from_torch_state_dict(state_dict: Mapping[str, np.ndarray]) -> tuple[dict[str, Any], dict[str, Any]]:
    """torchvision `r3d_18().state_dict()` (as numpy) -> (params, batch_stats) for rlfit.networks.r3d18.R3D18.

    The classifier `fc.*` is dropped; a `module.` prefix (DataParallel) is stripped; any other unknown key is a
    one-line UserError (not an r3d_18 checkpoint).
    """
    params: dict[str, Any] = {}
    batch_stats: dict[str, Any] = {}
    state = _strip(state_dict, "module.")
    for key, value in state.items():
        if key.startswith("fc."):
            continue
        match = _R3D_KEY.match(key)
        if match is None:
            raise UserError(f"{key} is not a parameter of torchvision's r3d_18; convert an r3d_18 checkpoint "
                            "(or choose the matching --kind)")
        if match["stem"] is not None:
            module, is_conv = ("stem_conv", True) if match["stem"] == "0" else ("stem_norm", False)
            prefix: tuple[str, ...] = (module,)
        else:
            module = _R3D_MODULES[match["module"]]
            is_conv = "conv" in module
            prefix = (f"layer{match['stage']}_{match['block']}", module)
        leaf, array = match["leaf"], np.asarray(value, dtype=np.float32)
        if is_conv:
            if leaf != "weight" or array.ndim != 5:
                raise UserError(f"{key} {array.shape} is not an r3d_18 Conv3d weight [O, I, D, H, W]")
            _put(params, (*prefix, "kernel"), array.transpose(2, 3, 4, 1, 0))
        elif leaf != "num_batches_tracked":
            collection, name = _BN[leaf]
            _put(params if collection == "params" else batch_stats, (*prefix, name), array)
    check_complete(state, r3d18_torch_keys(), "torchvision's r3d_18")
    return params, batch_stats


def r3d18_torch_keys() -> list[str]:
    """Every key torchvision's `r3d_18().state_dict()` holds, less the classifier `fc.*` and the optional
    `num_batches_tracked`: the stem, then two BasicBlocks per stage, a downsample in the first of stages 2-4."""
    def conv_bn(prefix: str) -> list[str]:
        return [f"{prefix}.0.weight", *(f"{prefix}.1.{leaf}" for leaf in _BN)]

    keys = conv_bn("stem")
    for stage in range(1, 5):
        for block in range(2):
            keys += conv_bn(f"layer{stage}.{block}.conv1") + conv_bn(f"layer{stage}.{block}.conv2")
            if stage > 1 and block == 0:
                keys += conv_bn(f"layer{stage}.{block}.downsample")
    return keys


def timesformer_hf_keys(depth: int) -> list[str]:
    """Every key of a Hugging Face `TimesformerModel.state_dict()` with `depth` layers, less the optional qkv
    biases (qkv_bias=False checkpoints have none)."""
    keys = ["embeddings.cls_token", "embeddings.position_embeddings", "embeddings.time_embeddings",
            "embeddings.patch_embeddings.projection.weight", "embeddings.patch_embeddings.projection.bias",
            "layernorm.weight", "layernorm.bias"]
    for index in range(depth):
        for module in _LAYER_MODULES:
            keys += [f"encoder.layer.{index}.{module}.{leaf}" for leaf in ("weight", "bias")
                     if not (leaf == "bias" and module.endswith(".qkv"))]
    return keys


def check_complete(keys: Collection[str], expected: Sequence[str], model: str) -> None:
    """A one-line UserError naming the keys of `expected` (the first few, and how many) that `keys` lacks."""
    missing = [key for key in expected if key not in keys]
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise UserError(f"the checkpoint lacks {len(missing)} of the {len(expected)} tensors of {model}: {shown}; "
                        "convert a complete checkpoint (or choose the matching --kind)")


def _linear(weight: np.ndarray) -> np.ndarray:
    return np.asarray(weight, np.float32).T


def timesformer_from_hf_state_dict(state_dict: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Hugging Face `TimesformerModel` (or `...ForVideoClassification`) state dict (as numpy) -> params for
    rlfit.networks.timesformer.TimeSformer (the name table is in that module's docstring).

    `timesformer.` prefixes are stripped and `classifier.*` dropped; a missing qkv bias (qkv_bias=False) becomes
    zeros, which computes the same; any other unknown key is a one-line UserError.
    """
    state = {key.removeprefix("timesformer."): value for key, value in _strip(state_dict, "module.").items()}
    params: dict[str, Any] = {}
    for key, value in state.items():
        if key.startswith("classifier."):
            continue
        array = np.asarray(value, np.float32)
        if key == "embeddings.patch_embeddings.projection.weight":
            _put(params, ("embeddings", "patch_projection", "kernel"), array.transpose(2, 3, 1, 0))
        elif key == "embeddings.patch_embeddings.projection.bias":
            _put(params, ("embeddings", "patch_projection", "bias"), array)
        elif key in ("embeddings.cls_token", "embeddings.position_embeddings", "embeddings.time_embeddings"):
            _put(params, ("embeddings", key.split(".")[1]), array)
        elif key in ("layernorm.weight", "layernorm.bias"):
            _put(params, ("layernorm", "scale" if key.endswith("weight") else "bias"), array)
        else:
            _put(params, *_timesformer_layer_entry(key, array))  # (path, array)
    for name, layer in params.items():
        if name.startswith("layer_"):
            for attention in ("temporal_attention", "attention"):
                qkv = layer.get(attention, {}).get("qkv", {})
                if "kernel" in qkv and "bias" not in qkv:
                    qkv["bias"] = np.zeros(qkv["kernel"].shape[1], np.float32)
    depth = 1 + max((int(name.removeprefix("layer_")) for name in params if name.startswith("layer_")), default=-1)
    check_complete(state, timesformer_hf_keys(max(depth, 1)), "Hugging Face's TimesformerModel")
    return params


_LAYER_KEY = re.compile(r"^encoder\.layer\.(?P<index>\d+)\.(?P<module>.+)\.(?P<leaf>weight|bias)$")
_LAYER_MODULES = {
    "temporal_layernorm": ("temporal_layernorm",), "layernorm_before": ("layernorm_before",),
    "layernorm_after": ("layernorm_after",), "temporal_dense": ("temporal_dense",),
    "temporal_attention.attention.qkv": ("temporal_attention", "qkv"),
    "temporal_attention.output.dense": ("temporal_attention", "output"),
    "attention.attention.qkv": ("attention", "qkv"), "attention.output.dense": ("attention", "output"),
    "intermediate.dense": ("intermediate",), "output.dense": ("output",),
}


def _timesformer_layer_entry(key: str, array: np.ndarray) -> tuple[tuple[str, ...], np.ndarray]:
    match = _LAYER_KEY.match(key)
    if match is None or match["module"] not in _LAYER_MODULES:
        raise UserError(f"{key} is not a parameter of Hugging Face's TimesformerModel; convert a TimeSformer "
                        "checkpoint (or choose the matching --kind)")
    module = _LAYER_MODULES[match["module"]]
    path = (f"layer_{match['index']}", *module)
    if "layernorm" in module[0]:
        return (*path, "scale" if match["leaf"] == "weight" else "bias"), array
    return (*path, "kernel" if match["leaf"] == "weight" else "bias"), (
        _linear(array) if match["leaf"] == "weight" else array)


def timesformer_geometry(params: Mapping[str, Any]) -> dict[str, int]:
    """patch_size, hidden, frames, image_size, depth and channels of converted TimeSformer params."""
    embeddings = params["embeddings"]
    patch, _, channels, hidden = embeddings["patch_projection"]["kernel"].shape
    side = int(round((embeddings["position_embeddings"].shape[1] - 1) ** 0.5))
    return {"patch_size": int(patch), "hidden": int(hidden), "channels": int(channels),
            "frames": int(embeddings["time_embeddings"].shape[1]), "image_size": side * int(patch),
            "depth": sum(1 for name in params if name.startswith("layer_"))}


def is_torch_checkpoint(source: Path) -> bool:
    r"""True when `source` starts like a file `torch.save` writes: a zip (b'PK', torch >= 1.6) or a pickle (b'\x80'
    then the protocol number, the legacy format). Anything else is read as safetensors."""
    with source.open("rb") as handle:
        head = handle.read(2)
    return head == b"PK" or head[:1] == b"\x80"


def read_safetensors(source: Path) -> dict[str, np.ndarray]:
    """{name: numpy array} from a .safetensors file, or a one-line UserError naming the file and safetensors'
    own reason (a damaged, truncated, empty or foreign file)."""
    import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy, for bf16 checkpoints)
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    try:
        return dict(load_file(str(source)))
    except (SafetensorError, TypeError, ValueError, OSError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        what = ("is not a readable safetensors file" if source.suffix == ".safetensors" else
                "is neither a PyTorch checkpoint (a zip or a pickle) nor a readable safetensors file")
        raise UserError(f"{source} {what} (safetensors: {reason}); download the checkpoint again or give "
                        "another file") from None


def read_state_dict(source: Path) -> dict[str, np.ndarray]:
    """{name: numpy array} from a .safetensors file (no torch) or a torch checkpoint (torch, weights_only).

    The format is told by the file's first bytes, not its name: only a zip or a pickle needs torch."""
    if not is_torch_checkpoint(source):
        return read_safetensors(source)
    try:
        import torch
    except ImportError:
        raise UserError(f"reading {source} (a PyTorch checkpoint) needs torch: pip install 'rlfit[torch]' "
                        "(or give a .safetensors checkpoint)") from None
    try:
        loaded = torch.load(str(source), map_location="cpu", weights_only=True)
    except Exception as error:
        raise UserError(f"{source} could not be read as a PyTorch state dict with weights_only=True "
                        f"({str(error).splitlines()[0] if str(error) else type(error).__name__}); "
                        "give the checkpoint's state_dict file") from None
    for wrapper in ("state_dict", "model"):
        if isinstance(loaded, dict) and isinstance(loaded.get(wrapper), dict):
            loaded = loaded[wrapper]
    if not isinstance(loaded, Mapping):
        raise UserError(f"{source} holds a {type(loaded).__name__}, not a state dict; save model.state_dict()")
    return {key: value.detach().to(torch.float32).cpu().numpy() for key, value in loaded.items()
            if hasattr(value, "detach")}


def _timesformer_spec(params: Mapping[str, Any], source: Path) -> Any:
    from rlfit.networks.encoders import EncoderSpec
    from rlfit.networks.timesformer import PRESETS

    geometry = timesformer_geometry(params)
    config_path = source.parent / "config.json"
    config = json.loads(config_path.read_text()) if config_path.is_file() else {}
    heads = int(config.get("num_attention_heads", geometry["hidden"] // 64))
    presets = [name for name, preset in PRESETS.items()
               if (preset.patch_size, preset.hidden, preset.depth, preset.heads)
               == (geometry["patch_size"], geometry["hidden"], geometry["depth"], heads)]
    if not presets:
        raise UserError(f"{source}: a TimeSformer of patch {geometry['patch_size']}, width {geometry['hidden']}, "
                        f"{geometry['depth']} layers, {heads} heads matches no rlfit preset "
                        f"({', '.join(PRESETS)}); convert a timesformer-base checkpoint")
    processor_path = source.parent / "preprocessor_config.json"
    processor = json.loads(processor_path.read_text()) if processor_path.is_file() else {}
    mean = tuple(float(v) for v in processor.get("image_mean", TIMESFORMER_MEAN))
    std = tuple(float(v) for v in processor.get("image_std", TIMESFORMER_STD))
    return EncoderSpec("timesformer", geometry["hidden"], geometry["frames"], geometry["image_size"],
                       geometry["channels"], preset=presets[0], mean=mean, std=std)


def convert_weights(source: str, kind: str, out: Path) -> Path:
    """Reads the torchvision (kind 'r3d18') or Hugging Face (kind 'timesformer') checkpoint file `source` and
    writes rlfit encoder weights to `out` (safetensors, the EncoderSpec with its input normalization in the
    metadata). Checks that every converted array fits the rlfit encoder before writing. Returns `out`.
    """
    import jax

    from rlfit.networks.encoders import KINETICS_MEAN, KINETICS_STD, EncoderSpec, make_encoder
    from rlfit.networks.pretrained import flatten, misfit, save_encoder_weights, spec_metadata

    if kind not in KINDS:
        raise UserError(f"convert-weights: unknown kind {kind!r}; choose one of {', '.join(KINDS)}")
    path = Path(source)
    if not path.is_file():
        raise UserError(f"convert-weights: no file at {path}; give the path of a torchvision or Hugging Face "
                        "checkpoint file")
    state_dict = read_state_dict(path)
    try:
        if kind == "r3d18":
            params, batch_stats = r3d18_from_torch_state_dict(state_dict)
            variables: dict[str, Any] = {"params": params, "batch_stats": batch_stats}
        else:
            variables = {"params": timesformer_from_hf_state_dict(state_dict)}
    except UserError as error:
        raise UserError(f"{path}: {error}") from None
    if kind == "r3d18":
        spec = EncoderSpec("r3d18", 512, 16, 112, 3, norm="frozen_bn", mean=KINETICS_MEAN, std=KINETICS_STD)
    else:
        spec = _timesformer_spec(variables["params"], path)
    module = make_encoder(spec)
    shapes = jax.eval_shape(module.init, jax.random.PRNGKey(0), jax.ShapeDtypeStruct(spec.input_shape(1), np.uint8))
    found = misfit(shapes, flatten(variables), fresh=())
    if found is not None:
        raise UserError(f"{path}: its tensors do not fit {kind}: {found[0]}; convert a checkpoint of the standard "
                        "architecture (or choose the matching --kind)")
    return save_encoder_weights(out, variables, spec_metadata(spec, source=path.name, kind=kind))
