"""The deployable policy file: the policy network alone, its observation statistics and a description.

    policy/
        policy.json   what the network is: layer sizes, activation, action head, observation key and shapes,
                      action size, environment, precision, rlfit version, sha256 of weights.npz
        weights.npz   params/<flax path> (the policy MLP), normalizer/{count, mean, sum_sq_dev} (its input's
                      running statistics)

`load_policy(path)` turns it into a jitted `obs -> action` function (normalize, MLP, then the deterministic
action of the recorded action head, as evaluation takes it: `rlfit.networks.heads`), without the training code
or the environment. A description without a head (written before heads were recorded) reads as the action
space's stochastic head: tanh_gaussian for continuous actions, categorical for discrete ones.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from rlfit.deploy.policy_record import PolicyActionSpace, PolicyDescription, PolicyNetwork, PolicyObservation
from rlfit.rundir.atomic import aside_path, swap_into_place, write_synced
from rlfit.rundir.layout import existing_run_dir
from rlfit.errors import UserError
from rlfit.versions import __version__

from rlfit.envs.action_space import CONTINUOUS, ActionSpace
from rlfit.networks.param_paths import flatten_params, unflatten_params

if TYPE_CHECKING:
    from rlfit.algos.contract import PolicySpec
    from rlfit.networks.heads import ActionHead
    from rlfit.algos.common.normalizer import RunningStats

FORMAT = "rlfit-policy"
FORMAT_VERSION = 2
"""The newest format this rlfit writes and reads. A policy whose head is the one version 1 implied (its action
space's stochastic head) is written as version 1, which older rlfit reads correctly; any other head as 2."""
DESCRIPTION_FILE = "policy.json"
WEIGHTS_FILE = "weights.npz"
LATENT_FILE = "latent.npz"
"""Optional: a bottleneck policy's unfolded params {'params/trunk/dense_0/kernel': ...}, for its stochastic policy
and description length (the deployable weights fold z = mean away)."""
NETWORK_KIND = "mlp"
"""An MLP whose output is the action distribution's logits (`action_space`), on a vector observation."""
ENCODER_NETWORK_KIND = "encoder_mlp"
"""An encoder of camera frames [T, H, W, C] (`network.encoder`, an `EncoderSpec`) feeding such an MLP."""
NETWORK_KINDS = (NETWORK_KIND, ENCODER_NETWORK_KIND)
ARRAY_OBS_NAME = "obs"
"""The name observation_shapes gives an environment's observation when it is one array, not a dict."""


class PolicyFiles(NamedTuple):
    """The contents of a policy directory, as numpy arrays."""

    description: dict[str, Any]
    """policy.json."""
    params: dict[str, Any]
    """Nested dict of the policy MLP's flax params: {'params': {'dense_0': {'kernel': [in, out], 'bias': [out]}}}."""
    count: float
    """Observations the statistics were computed from (0: the policy sees raw observations)."""
    mean: np.ndarray
    """[obs_dim] running mean of the policy's observation."""
    sum_sq_dev: np.ndarray
    """[obs_dim] running sum of squared deviations (std = sqrt(sum_sq_dev / count), clipped)."""


def save_policy(directory: Path, policy_params: Any, stats: RunningStats, spec: PolicySpec, obs_example: Any,
                action_space: ActionSpace, env_name: str, precision: str, algorithm: str,
                latent_params: Any = None) -> None:
    """Writes the policy to `directory` atomically (a temporary folder renamed into place).

    `policy_params`: the policy MLP's flax params; `stats`: the training RunningStats (a pytree like one
    observation); `spec`: the acting network (`Learner.policy`); `obs_example`: one unbatched observation
    (array or dict) for its shapes; `algorithm`: the algorithm that trained it (recorded). `latent_params`: with an
    information bottleneck, its unfolded flax params (trunk, mu, raw_sigma, out), written beside the weights as
    `LATENT_FILE` so the stochastic policy and its description length can be evaluated again (`rlfit.study`).
    """
    directory = Path(directory)
    obs_key = policy_obs_key(obs_example, spec.obs_key)
    weights = {f"params/{name}": value for name, value in flatten_params(policy_params).items()}
    weights["normalizer/count"] = np.asarray(stats.count, np.float32)
    weights["normalizer/mean"] = np.asarray(_entry(stats.mean, obs_key), np.float32)
    weights["normalizer/sum_sq_dev"] = np.asarray(_entry(stats.sum_sq_dev, obs_key), np.float32)
    description = describe(spec, obs_example, obs_key, action_space, env_name, precision, algorithm)
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.tmp-", dir=directory.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; a policy folder is as readable as the run directory
    try:
        weights_bytes = _npz_bytes(weights)
        written = dataclasses.replace(description, weights_sha256=hashlib.sha256(weights_bytes).hexdigest())
        write_synced(staging / WEIGHTS_FILE, weights_bytes)
        write_synced(staging / DESCRIPTION_FILE, (json.dumps(written.to_json(), indent=2) + "\n").encode())
        if latent_params is not None:
            write_synced(staging / LATENT_FILE, _npz_bytes(flatten_params(latent_params)))
        swap_into_place(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def describe(spec: PolicySpec, obs_example: Any, obs_key: str | None, action_space: ActionSpace, env_name: str,
             precision: str, algorithm: str) -> PolicyDescription:
    """The description of a policy (everything but the arrays; `weights_sha256` is left for `save_policy`)."""
    from rlfit.networks.heads import action_head, default_head_name

    shapes = observation_shapes_of(obs_example)
    input_shape = shapes[obs_key if obs_key is not None else ARRAY_OBS_NAME]
    head = action_head(spec.head, action_space)
    return PolicyDescription(
        format=FORMAT,
        format_version=1 if head.name == default_head_name(action_space) else FORMAT_VERSION,
        rlfit_version=__version__,
        env_name=env_name,
        algorithm=algorithm,
        action_size=int(action_space.size),
        action_space=PolicyActionSpace(kind=action_space.kind, size=int(action_space.size)),
        precision=precision,
        network=PolicyNetwork(
            kind=NETWORK_KIND if spec.encoder is None else ENCODER_NETWORK_KIND,
            encoder=None if spec.encoder is None else dict(spec.encoder),
            layer_sizes=[int(s) for s in spec.hidden] + [int(head.output_size(action_space.size))],
            activation=spec.activation,
            head=head.name,
            output=head.description,
        ),
        observation=PolicyObservation(
            policy_key=obs_key,
            input_shape=list(input_shape),
            shapes={name: list(shape) for name, shape in shapes.items()},
            normalization="(obs - mean) / clip(sqrt(sum_sq_dev / count), 1e-6, 1e6); none when count == 0",
        ),
    )


def policy_obs_key(obs_example: Any, requested: str) -> str | None:
    """The dict entry the policy reads (as `rlfit.networks.select_obs` picks it); None for array observations."""
    if not isinstance(obs_example, Mapping):
        return None
    from rlfit.networks import select_obs

    return select_obs({name: name for name in obs_example}, requested)


def observation_shapes_of(obs_example: Any) -> dict[str, tuple[int, ...]]:
    """{entry: shape} of one observation; an array observation is named 'obs'."""
    if isinstance(obs_example, Mapping):
        return {str(name): tuple(int(d) for d in np.shape(value)) for name, value in obs_example.items()}
    return {ARRAY_OBS_NAME: tuple(int(d) for d in np.shape(obs_example))}


def _entry(tree: Any, key: str | None) -> Any:
    return tree if key is None else tree[key]


def _npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    import io

    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


# ----------------------------------------------------------------------------------------------- loading


def policy_location(run_dir: str | Path, checkpoint: str | None = None) -> Path:
    """Where a run's policy is: RUN_DIR itself, or RUN_DIR/checkpoints/<checkpoint> ('50' finds '00000050')."""
    run_dir = existing_run_dir(run_dir)
    if checkpoint is None:
        return run_dir
    root = run_dir / "checkpoints"
    names = [checkpoint] + ([f"{int(checkpoint):08d}"] if checkpoint.isdigit() else [])
    for name in names:
        if (root / name).is_dir():
            return root / name
    steps = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name.isdigit()) if root.is_dir() else []
    available = ", ".join(str(int(name)) for name in steps) or "none"
    raise UserError(f"no checkpoint '{checkpoint}' in {root} (available: {available}); pick one of those")


def find_policy_dir(path: str | Path) -> Path:
    """The policy directory for a run dir, a checkpoint step dir, a policy dir or its policy.json."""
    path = Path(path)
    if path.is_file() and path.name == DESCRIPTION_FILE:
        return path.parent
    for candidate in (path, path / "policy"):
        if (candidate / DESCRIPTION_FILE).is_file():
            return candidate
        if (aside_path(candidate) / DESCRIPTION_FILE).is_file():  # a save was interrupted mid-swap
            return aside_path(candidate)
    if not path.exists():
        raise UserError(f"{path} does not exist; pass a run directory, RUN_DIR/checkpoints/<step> or a policy folder")
    raise UserError(f"no saved policy in {path} (looked for {DESCRIPTION_FILE} and policy/{DESCRIPTION_FILE}); "
                    "pass a run directory that has finished or saved a checkpoint")


def read_policy_files(path: str | Path) -> PolicyFiles:
    """Reads and checks a policy directory (see `find_policy_dir`); a damaged one is a one-line UserError."""
    directory = find_policy_dir(path)
    try:
        description = json.loads((directory / DESCRIPTION_FILE).read_text())
        weights_bytes = (directory / WEIGHTS_FILE).read_bytes()
    except (OSError, ValueError) as error:
        raise UserError(f"cannot read the policy in {directory}: {error}; save it again or use another "
                        "checkpoint (--checkpoint)") from None
    _check_description(description, directory)
    if hashlib.sha256(weights_bytes).hexdigest() != description.get("weights_sha256"):
        raise UserError(f"the policy in {directory} is corrupt ({WEIGHTS_FILE} does not match its checksum); "
                        "use another checkpoint (--checkpoint) or save it again")
    arrays = _read_npz(weights_bytes, directory)
    params = unflatten_params({name[len("params/"):]: value for name, value in arrays.items()
                               if name.startswith("params/")})
    return PolicyFiles(description, params, float(arrays["normalizer/count"]), arrays["normalizer/mean"],
                       arrays["normalizer/sum_sq_dev"])


def _check_description(description: Any, directory: Path) -> None:
    if not isinstance(description, dict) or description.get("format") != FORMAT:
        raise UserError(f"{directory / DESCRIPTION_FILE} is not an rlfit policy description")
    if int(description.get("format_version", 0)) > FORMAT_VERSION:
        raise UserError(f"the policy in {directory} has format version {description['format_version']}, newer "
                        f"than this rlfit reads ({FORMAT_VERSION}); upgrade rlfit")
    for key in ("action_size", "precision", "network", "observation", "weights_sha256"):
        if key not in description:
            raise UserError(f"{directory / DESCRIPTION_FILE} lacks '{key}'; save the policy again")
    kind = description["network"].get("kind") if isinstance(description["network"], dict) else None
    if kind not in NETWORK_KINDS:
        raise UserError(f"the policy in {directory} is a '{kind}' network, which this rlfit cannot load (it reads "
                        f"{', '.join(NETWORK_KINDS)}); upgrade rlfit")
    head, sizes = head_of(description), description["network"].get("layer_sizes") or [None]
    if sizes[-1] != head.output_size(action_space_of(description).size):
        raise UserError(f"the policy in {directory} has {sizes[-1]} outputs, but its action head '{head.name}' reads "
                        f"{head.output_size(action_space_of(description).size)}; save the policy again")


def _read_npz(data: bytes, directory: Path) -> dict[str, np.ndarray]:
    import io

    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise UserError(f"cannot read {directory / WEIGHTS_FILE}: {error}; save the policy again") from None
    for name in ("normalizer/count", "normalizer/mean", "normalizer/sum_sq_dev"):
        if name not in arrays:
            raise UserError(f"{directory / WEIGHTS_FILE} lacks {name}; save the policy again")
    return arrays


@dataclass(frozen=True)
class Policy:
    """A loaded policy: `policy(obs) -> action`, with obs [..., obs_dim] (or a dict holding the policy's entry)
    and action [..., action_size] in [-1, 1] (continuous) or [...] int32 in [0, action_size) (discrete)."""

    description: dict[str, Any]
    """policy.json as a dict."""
    act: Callable[[Any], Any]
    """The jitted function on the policy's observation array: [..., obs_dim] -> [..., action_size]."""

    @property
    def action_size(self) -> int:
        """Continuous: action dimensions; discrete: the number of actions."""
        return int(self.description["action_size"])

    @property
    def action_space(self) -> ActionSpace:
        return action_space_of(self.description)

    @property
    def head(self) -> ActionHead:
        """How the network's output becomes the action (`rlfit.networks.heads`)."""
        return head_of(self.description)

    @property
    def observation_shapes(self) -> dict[str, tuple[int, ...]]:
        """{entry: shape} of the environment's observation; one array observation is named 'obs'."""
        return {name: tuple(shape) for name, shape in self.description["observation"]["shapes"].items()}

    @property
    def obs_key(self) -> str | None:
        """The dict entry the policy reads (None when the observation is one array)."""
        return self.description["observation"]["policy_key"]

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.description["observation"]["input_shape"])

    def __call__(self, obs: Any) -> Any:
        if isinstance(obs, Mapping):
            if self.obs_key not in obs:
                raise UserError(f"the observation has entries {sorted(obs)} but the policy reads '{self.obs_key}'")
            obs = obs[self.obs_key]
        return self.act(obs)


def load_policy(path: str | Path, precision: str | None = None) -> Policy:
    """Loads a saved policy from a run dir (RUN_DIR/policy), a checkpoint step dir or a policy dir.

    Returns `Policy`, callable `obs -> action` (jitted; observation normalization, MLP, the recorded action head's
    deterministic action: tanh(mean), tanh(output), or the most likely index for discrete actions).
    `precision` overrides the compute precision it was trained with ('fp32', 'bf16' or 'fp16').
    """
    files = read_policy_files(path)
    return Policy(files.description, jax_policy_function(files, precision or files.description["precision"]))


def jax_policy_function(files: PolicyFiles, precision: str) -> Callable[[Any], Any]:
    """The jitted deterministic action [..., obs_dim] -> [..., action_size] for `files`."""
    import jax

    apply, arrays = policy_apply(files, precision)
    return jax.jit(lambda obs: apply(arrays, obs))


def policy_apply(files: PolicyFiles, precision: str) -> tuple[Callable[[Any, Any], Any], Any]:
    """(apply, arrays): `apply(arrays, obs) -> action`, pure, with the policy's arrays as an argument (one
    compiled program serves every policy of the same network), and `files`' arrays."""
    import jax
    import jax.numpy as jnp

    from rlfit.networks import COMPUTE_DTYPES, MLP
    from rlfit.algos.common.normalizer import RunningStats, normalize

    network = files.description["network"]
    if precision not in COMPUTE_DTYPES or network.get("activation") not in _activations():
        raise UserError(f"the policy asks for precision '{precision}' and activation '{network.get('activation')}', "
                        "which this rlfit does not know; upgrade rlfit")
    mlp = MLP(tuple(network["layer_sizes"]), network["activation"], COMPUTE_DTYPES[precision])
    params = jax.tree.map(jnp.asarray, files.params)
    stats = RunningStats(jnp.asarray(files.count, jnp.float32), jnp.asarray(files.mean), jnp.asarray(files.sum_sq_dev))
    mode = head_of(files.description).mode
    if network["kind"] == ENCODER_NETWORK_KIND:
        return encoder_policy_function(network, mlp, precision, mode), params

    def apply(arrays: tuple[Any, RunningStats], obs: jax.Array) -> jax.Array:
        mlp_params, obs_stats = arrays
        return mode(mlp.apply(mlp_params, normalize(obs_stats, jnp.asarray(obs, jnp.float32))))

    return apply, (params, stats)


def encoder_policy_function(network: Mapping[str, Any], mlp: Any, precision: str, mode: Callable[[Any], Any]
                            ) -> Callable[[Any, Any], Any]:
    """(params, frames [..., T, H, W, C] (uint8)) -> action: the encoder, the MLP, the head's `mode`."""
    import jax.numpy as jnp

    from rlfit.networks import COMPUTE_DTYPES
    from rlfit.networks.encoders import EncoderSpec, make_encoder
    from rlfit.networks.pixels import PixelPolicy

    spec = EncoderSpec.from_dict(network["encoder"])
    module = PixelPolicy(make_encoder(spec, COMPUTE_DTYPES[precision]), mlp)

    def apply(params: Any, frames: Any) -> Any:  # PixelPolicy keeps any leading axes
        return mode(module.apply(params, jnp.asarray(frames)))

    return apply


def action_space_of(description: Mapping[str, Any]) -> ActionSpace:
    """The action space a policy description records (files written before discrete actions: continuous)."""
    recorded = description.get("action_space") or {"kind": CONTINUOUS, "size": description["action_size"]}
    return ActionSpace(str(recorded["kind"]), int(recorded["size"]))


def head_of(description: Mapping[str, Any]) -> ActionHead:
    """The action head a policy description records (files written before heads were recorded: the action
    space's stochastic head, tanh_gaussian or categorical); an unknown one is a UserError."""
    from rlfit.networks.heads import action_head

    return action_head(description["network"].get("head"), action_space_of(description))


def _activations() -> tuple[str, ...]:
    from rlfit.networks import ACTIVATIONS

    return tuple(ACTIVATIONS)
