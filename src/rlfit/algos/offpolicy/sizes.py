"""The sizes of a replay-buffer algorithm (SAC, FastTD3): what shapes its compiled step and its state, and the
out-of-memory back-off. Pure Python."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from rlfit.algos.offpolicy.types import ReplaySettings


class ReplaySizes(NamedTuple):
    """The sizes that shape an off-policy algorithm's compiled step and its replay buffer."""

    num_envs: int
    batch_size: int
    max_replay_size: int
    policy_steps_per_iteration: int

    @property
    def steps_per_iteration(self) -> int:
        """Policy steps per iteration over all environments: num_envs * policy_steps_per_iteration."""
        return self.num_envs * self.policy_steps_per_iteration


def section_sizes(section: ReplaySettings) -> ReplaySizes:
    """The sizes of an off-policy algorithm's config section (`rlfit.algos.offpolicy.types.ReplaySettings`)."""
    return ReplaySizes(section.num_envs, section.batch_size, section.max_replay_size, section.policy_steps_per_iteration)


def smaller_sizes(sizes: ReplaySizes, where: str = "step") -> ReplaySizes | None:
    """The next smaller sizes after running out of memory, or None.

    Creating the starting state ('init') allocates the replay buffer, so it is halved first (as long as it
    holds two policy steps and a batch); compiling or running an iteration ('step') scales with the
    environments, so they are halved first (the same policy steps per iteration). Either falls back to the
    other. A smaller buffer starts empty and is prefilled again.
    """
    can_halve_replay = sizes.max_replay_size // 2 >= max(sizes.batch_size, 2 * sizes.num_envs)
    halve_replay = sizes._replace(max_replay_size=sizes.max_replay_size // 2) if can_halve_replay else None
    halve_envs = sizes._replace(num_envs=sizes.num_envs // 2) if sizes.num_envs >= 2 else None
    first, second = (halve_replay, halve_envs) if where == "init" else (halve_envs, halve_replay)
    return first or second
