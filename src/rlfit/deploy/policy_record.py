"""policy.json, the policy file's description, as typed records: `PolicyDescription` with its action space, network
and observation (`rlfit.deploy.policy_file` writes it with `to_json` and checks what it reads).

`PolicyDescription.from_json` reads a description of another rlfit version (unknown keys ignored, missing fields
None, `rlfit.rundir.records`); what a file may lack and what that means (no head: the action space's stochastic
one; no action space: continuous) is `rlfit.deploy.policy_file`'s to decide.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlfit.rundir.records import WRITTEN_WHEN_SET, JsonRecord


@dataclass(frozen=True)
class PolicyActionSpace(JsonRecord):
    """The actions the policy takes."""

    kind: str
    """'continuous' (actions in [-1, 1]) or 'discrete' (an index)."""
    size: int
    """Continuous: action dimensions; discrete: the number of actions."""


@dataclass(frozen=True, kw_only=True)
class PolicyNetwork(JsonRecord):
    """The acting network: an MLP, behind an encoder of camera frames for `encoder_mlp`."""

    kind: str
    """'mlp' (on a vector observation) or 'encoder_mlp' (an encoder of camera frames [T, H, W, C] feeding the MLP)."""
    encoder: dict[str, Any] | None = field(default=None, metadata=WRITTEN_WHEN_SET)
    """With `encoder_mlp`: the encoder (`rlfit.networks.encoders.EncoderSpec.to_dict()`); absent for an `mlp`."""
    layer_sizes: list[int]
    """Units of each of the MLP's dense layers, the last one the head's outputs."""
    activation: str
    """The activation between dense layers (`rlfit.networks.ACTIVATIONS`)."""
    head: str
    """The action head that turns the output into an action (`rlfit.networks.heads`: 'tanh_gaussian',
    'deterministic_tanh', 'categorical', 'q_argmax')."""
    output: str
    """What the MLP's output is, in words (the head's description)."""


@dataclass(frozen=True)
class PolicyObservation(JsonRecord):
    """What the policy reads of the environment's observation, and how it normalizes it."""

    policy_key: str | None
    """The entry of a dict observation the policy reads; null when the observation is one array."""
    input_shape: list[int]
    """Shape of one observation the network reads (unbatched)."""
    shapes: dict[str, list[int]]
    """{entry: shape} of the environment's whole observation; one array observation is named 'obs'."""
    normalization: str
    """How the observation is normalized with weights.npz's `normalizer/*` statistics, as a formula."""


@dataclass(frozen=True)
class PolicyDescription(JsonRecord):
    """policy.json: what the network in weights.npz is, what it reads and what trained it."""

    format: str
    """Always 'rlfit-policy'."""
    format_version: int
    """1 for a policy whose head is its action space's stochastic one (what every rlfit reads), 2 for any other."""
    rlfit_version: str
    """The rlfit that wrote the file."""
    env_name: str
    """The environment the policy was trained on."""
    algorithm: str
    """The algorithm that trained it ('ppo', 'sac', 'fasttd3', ...)."""
    action_size: int
    """Continuous: action dimensions; discrete: the number of actions."""
    action_space: PolicyActionSpace
    """The actions the policy takes."""
    precision: str
    """The networks' compute precision in training ('fp32', 'bf16' or 'fp16'), which loading uses by default."""
    network: PolicyNetwork
    """The acting network."""
    observation: PolicyObservation
    """What the policy reads and how it normalizes it."""
    weights_sha256: str | None = None
    """sha256 of weights.npz (loading refuses a file that does not match)."""
