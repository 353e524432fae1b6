"""Pretrained encoder weights as safetensors files, never pickle: save, load, and put into a model's variables.

A file holds the flattened variables of one encoder (`params.stem_conv.kernel`, `batch_stats.stem_norm.mean`, ...:
the nested dict's keys joined with '.') and string metadata: `format` (FORMAT), `encoder_spec` (the
EncoderSpec as JSON, input normalization included) and whatever the writer adds (`source`, ...).

A PyTorch `.pt`/`.pth`/`.bin` file is a pickle (or a zip around one) and can run code when loaded; it is refused
here. `rlfit convert-weights` (rlfit.networks.convert) reads those with torch's `weights_only` loader, once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlfit.config.weights_file import SETTING, check_safetensors
from rlfit.errors import UserError
from rlfit.networks.param_paths import unflatten_params

FORMAT = "rlfit-encoder-weights-1"


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dict of arrays -> {'a.b.c': array} (the arrays themselves, not copies)."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if "." in str(key):
            raise ValueError(f"a parameter name may not contain '.': {prefix}{key}")
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """{'a.b.c': array} -> nested dict of arrays (the inverse of `flatten`)."""
    return unflatten_params(flat, separator=".")


def save_encoder_weights(path: str | Path, params_tree: Mapping[str, Any], metadata: Mapping[str, str]) -> Path:
    """Writes `params_tree` (nested dict of arrays, e.g. {'params': ..., 'batch_stats': ...}) to `path`.

    `metadata` values must be strings (safetensors stores only strings); FORMAT is added as `format`.
    """
    from safetensors.numpy import save_file

    path = Path(path)
    bad = [key for key, value in metadata.items() if not isinstance(value, str)]
    if bad:
        raise TypeError(f"safetensors metadata values must be strings: {bad}")
    tensors = {name: np.ascontiguousarray(np.asarray(array)) for name, array in flatten(params_tree).items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata={**metadata, "format": FORMAT})
    return path


def load_encoder_weights(path: str | Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """({'params.stem_conv.kernel': array, ...}, metadata) from a file `save_encoder_weights` wrote."""
    from safetensors import safe_open
    from safetensors.numpy import load_file

    path = check_safetensors(path)
    try:
        with safe_open(str(path), framework="numpy") as handle:
            metadata = dict(handle.metadata() or {})
        tensors = load_file(str(path))
    except Exception as error:  # a damaged file: safetensors' own message, on one line
        raise UserError(f"{SETTING}: {path} could not be read as safetensors ({str(error).splitlines()[0]}); "
                        "convert the weights again with `rlfit convert-weights`") from None
    return tensors, metadata


def spec_metadata(spec: Any, **extra: str) -> dict[str, str]:
    """Metadata for `save_encoder_weights`: the EncoderSpec (normalization included) as JSON, plus `extra`."""
    return {"encoder_spec": spec.to_json(), **extra}


def spec_from_metadata(metadata: Mapping[str, str], path: str | Path = "") -> Any:
    """The EncoderSpec a weights file was made for (a one-line UserError when the file does not say)."""
    import json

    from rlfit.networks.encoders import EncoderSpec

    if "encoder_spec" not in metadata:
        raise UserError(f"{SETTING}: {path} does not say which encoder its weights are for (no encoder_spec); "
                        "convert the weights again with `rlfit convert-weights`")
    return EncoderSpec.from_dict(json.loads(metadata["encoder_spec"]))


def misfit(params: Mapping[str, Any], loaded: Mapping[str, Any], fresh: Sequence[str] = ("projection",)
           ) -> tuple[str, str] | None:
    """(what, case) for the first key of `loaded` (flat) that `params` (nested, arrays or ShapeDtypeStructs) lacks
    (case 'extra') or has in another shape ('shape'), or the first leaf of `params` that `loaded` lacks
    ('missing'), unless a part of its name is in `fresh`; None when they fit."""
    flat = flatten(params)
    for name, array in loaded.items():
        if name not in flat:
            return f"{name} {tuple(np.shape(array))} is in the file but not in the model", "extra"
        if tuple(np.shape(array)) != tuple(flat[name].shape):
            return (f"{name} is {tuple(np.shape(array))} in the file but {tuple(flat[name].shape)} in the model",
                    "shape")
    for name in flat:
        if name not in loaded and not set(name.split(".")) & set(fresh):
            return f"{name} {tuple(flat[name].shape)} is in the model but not in the file", "missing"
    return None


def check_fits(params: Mapping[str, Any], loaded: Mapping[str, Any], fresh: Sequence[str] = ("projection",)) -> None:
    """A one-line UserError naming the first key of `loaded` (flat) that `params` (nested, arrays or
    ShapeDtypeStructs) lacks or has in another shape, or the first leaf of `params` that `loaded` lacks, unless a
    part of its name is in `fresh` (rlfit's projection layer, which no checkpoint has)."""
    found = misfit(params, loaded, fresh)
    if found is not None:
        what, case = found
        fix = ("set the encoder's size to the checkpoint's (or convert weights for this size)" if case == "shape"
               else "convert weights for this encoder with `rlfit convert-weights`")
        raise UserError(f"{SETTING}: the weights do not fit this encoder: {what}; {fix}")


def apply_pretrained(params: Mapping[str, Any], loaded: Mapping[str, Any],
                     fresh: Sequence[str] = ("projection",)) -> dict[str, Any]:
    """`params` (nested variables, e.g. {'params': ..., 'batch_stats': ...}) with every leaf replaced by the
    same-named array of `loaded` (flat, '.'-joined names, as `load_encoder_weights` returns), cast to the leaf's
    dtype; leaves named in `fresh` that the file lacks keep their values. `check_fits` first (one-line errors)."""
    import jax.numpy as jnp

    check_fits(params, loaded, fresh)
    merged = {name: jnp.asarray(loaded[name], dtype=leaf.dtype) if name in loaded else leaf
              for name, leaf in flatten(params).items()}
    return unflatten(merged)
