"""The two Protocols the shared off-policy parts are written against: the config section's size fields and the
training state's collecting fields. SAC's and FastTD3's config sections and states satisfy them."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, ClassVar, Protocol, Self, TypeVar

if TYPE_CHECKING:
    import jax

    from rlfit.algos.common.normalizer import RunningStats
    from rlfit.algos.offpolicy.replay import ReplayState
    from rlfit.envs.vec_env import EnvState

StateT = TypeVar("StateT", bound="OffPolicyState")


class ReplaySettings(Protocol):
    """The fields of an off-policy algorithm's config section that sizing, collecting and the prefill read; the
    section is a dataclass (`dataclasses.replace` gives it the plan's sizes)."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[object]]]

    @property
    def num_envs(self) -> int:
        """N parallel environments; each policy step adds N transitions."""

    @property
    def batch_size(self) -> int:
        """Transitions per gradient update."""

    @property
    def min_replay_size(self) -> int:
        """Transitions the uniform random prefill collects before training."""

    @property
    def max_replay_size(self) -> int:
        """The replay buffer's capacity in transitions (rounded down to whole policy steps)."""

    @property
    def policy_steps_per_iteration(self) -> int:
        """Policy steps of the N environments in one compiled iteration."""

    @property
    def normalize_observations(self) -> bool:
        """Whether collecting updates the running observation statistics."""


class OffPolicyState(Protocol):
    """The fields of an off-policy training state (a NamedTuple) that collecting and the prefill read and replace."""

    @property
    def normalizer(self) -> RunningStats:
        """Running observation statistics."""

    @property
    def env_state(self) -> EnvState:
        """The N environments' states."""

    @property
    def replay(self) -> ReplayState:
        """The device replay buffer (`rlfit.algos.offpolicy.replay`)."""

    @property
    def key(self) -> jax.Array:
        """[2] uint32 PRNG key for the next step."""

    @property
    def policy_steps(self) -> jax.Array:
        """[] int32 policy steps taken by each environment."""

    def _replace(self, *, normalizer: RunningStats = ..., env_state: EnvState = ..., replay: ReplayState = ...,
                 key: jax.Array = ..., policy_steps: jax.Array = ...) -> Self:
        """The state with these fields replaced (NamedTuple's `_replace`, whose other keywords the shared code never
        passes)."""
