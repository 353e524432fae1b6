"""What kind of actions an environment takes, read from the environment itself.

The environment contract (`rlfit.envs.loading`): an environment with an integer attribute `num_actions` is
discrete (its `step` takes one int32 action in [0, num_actions)); otherwise it is continuous with
`action_size` dimensions in [-1, 1].
"""

from __future__ import annotations

from typing import Any, NamedTuple

CONTINUOUS = "continuous"
DISCRETE = "discrete"


class ActionSpace(NamedTuple):
    """The actions an environment takes."""

    kind: str
    """'continuous' (a tanh-squashed Gaussian acts) or 'discrete' (a categorical acts)."""
    size: int
    """Continuous: action dimensions A; discrete: the number of choices K."""

    @property
    def discrete(self) -> bool:
        return self.kind == DISCRETE

    @property
    def logits_size(self) -> int:
        """Width of the policy network's output: 2 * A (mean, raw scale) or K (logits)."""
        return self.size if self.discrete else 2 * self.size

    def describe(self) -> str:
        return f"{self.size} discrete actions" if self.discrete else f"{self.size} continuous action dimensions"


def action_space(env: Any) -> ActionSpace:
    """The action space `env` (an environment, a `VecEnv` or a wrapper) declares."""
    num_actions = getattr(env, "num_actions", None)
    if num_actions is not None:
        return ActionSpace(DISCRETE, int(num_actions))
    return ActionSpace(CONTINUOUS, int(env.action_size))
