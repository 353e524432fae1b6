"""What each measure a report compares is: its definition, its unit, whether it is a score (higher is better, so
a performance profile means something), and which policy produced it.

    info("suite/slow-control") -> MeasureInfo(definition="return of the final policy on suite `slow-control` ...",
                                              unit="return", score=True, policy=MOST_LIKELY)
"""

from __future__ import annotations

from typing import NamedTuple

MOST_LIKELY = "most likely action"
"""How rlfit's evaluations act (`rlfit.run.evaluate`): the mode of the policy's distribution (tanh of the mean, or the
argmax); the stochastic policy (sampled actions) is not evaluated."""
MOST_LIKELY_DEFINITION = "the mode of the policy's distribution: tanh of the Gaussian's mean, or the argmax of the logits"
RETURN = "return (sum of rewards over an episode)"


class MeasureInfo(NamedTuple):
    """A measure's definition, unit (axis labels), whether higher is better, and the policy evaluated ('' if none)."""

    definition: str
    unit: str
    score: bool
    policy: str


SUMMARY_INFO = {
    "final_eval_reward": MeasureInfo("mean return of the last evaluation, over `run.num_eval_envs` episodes", RETURN,
                                     True, MOST_LIKELY),
    "best_eval_reward": MeasureInfo("the highest mean return of any evaluation during training (a maximum over "
                                    "evaluations: evaluation noise biases it upward)", RETURN, True, MOST_LIKELY),
    "sps_mean": MeasureInfo("env steps per second of training", "env steps / s", False, ""),
    "train_wall_s": MeasureInfo("wall-clock time of training", "s", False, ""),
    "compile_s": MeasureInfo("time spent compiling the training programs", "s", False, ""),
    "env_steps": MeasureInfo("env steps trained", "env steps", False, ""),
    "iterations": MeasureInfo("training iterations", "iterations", False, ""),
    "final_description_length_bits": MeasureInfo(
        "the policy's mean description length of one observation at the last evaluation (bottleneck rate over the "
        "states the evaluation visited)", "bits per observation", False, ""),
}
SUITE_FIELDS = {
    "success_rate": MeasureInfo("fraction of the suite's episodes that reached the goal", "fraction of episodes", True, ""),
    "normalized_reward": MeasureInfo("mean over episodes of (return - failing) / (optimal - failing): 0 for an "
                                     "episode that never reaches the goal, 1 for a shortest path (gridworld)",
                                     "fraction of the optimum's margin over failing", True, ""),
    "description_length_bits": MeasureInfo("the policy's description length of one observation: the bottleneck's "
                                           "rate over the states the suite's episodes visited",
                                           "bits per step", False, ""),
    "description_length_bits_per_episode": MeasureInfo("the bottleneck's rate summed over each episode of the suite, "
                                                       "averaged over episodes", "bits per episode", False, ""),
}
"""Optional fields of a trial's suites.json entry, compared as suite/<name>/<field> when recorded."""

TRAINING_COLUMNS = {"final_eval_reward": "eval/episode_reward", "best_eval_reward": "eval/episode_reward",
                    "final_description_length_bits": "eval/description_length_bits"}
"""measure -> the metrics.jsonl eval column that records it along training; a measure not here (a suite's) is
measured on the final policy only."""


def info(measure: str, suite_policy: str = "") -> MeasureInfo:
    """What `measure` is; a config key ('ppo.learning_rate') is a setting with no unit of its own."""
    if measure in SUMMARY_INFO:
        return SUMMARY_INFO[measure]
    if measure.startswith("suite/"):
        suite, _, field = measure.removeprefix("suite/").partition("/")
        policy = suite_policy or MOST_LIKELY
        if field in SUITE_FIELDS:
            base = SUITE_FIELDS[field]
            return base._replace(definition=f"{base.definition} (suite `{suite}`)", policy=policy)
        return MeasureInfo(f"mean return of the final policy on suite `{suite}`, over the suite's episodes", RETURN,
                           True, policy)
    if measure.endswith("/normalized"):
        base = measure.removesuffix("/normalized")
        return MeasureInfo(f"`{base}` divided by the manifest's reference_return", "fraction of the reference return",
                           True, info(base).policy)
    return MeasureInfo(f"the config setting `{measure}`", "setting", False, "")


def axis_label(measure: str) -> str:
    """'final_eval_reward' over '(return (sum of rewards over an episode))' on a second line, for an axis."""
    return f"{measure}\n({info(measure).unit})"


def is_return(measure: str) -> bool:
    """A measure in return units, which a reference return can normalize."""
    return info(measure).unit == RETURN
