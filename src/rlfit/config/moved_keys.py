"""Config keys that moved to another section, still read under their old names.

PPO's network settings left the `network` section (now the camera-frame encoder of every algorithm) for `ppo`
(2026-11-27). Config files, `--set` items and run directories saved before still name them `network.<key>`, so
each config layer is rewritten before it is merged (`rlfit.config.schema.from_layers`):

    network.policy_hidden: [64, 64]   -> ppo.policy_hidden: [64, 64]    when the run's algo is ppo
                                      -> dropped                        for another algorithm (it never read them),
                                                                        except a non-zero bottleneck: refused

Within one layer the new name wins over the old one; across layers the later layer wins, as for any key. One note
per process on stderr names the old keys met and their new names.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from rlfit.config.algorithms import title
from rlfit.config.values import to_type
from rlfit.errors import UserError

MOVED_KEYS: dict[str, str] = {f"network.{key}": f"ppo.{key}" for key in (
    "policy_hidden", "value_hidden", "activation", "policy_obs_key", "value_obs_key", "bottleneck",
    "bottleneck_beta")}
"""Old 'section.key' -> its new 'section.key'."""
REFUSED_ELSEWHERE = ("network.bottleneck",)
"""Old keys that another algorithm refuses when non-zero (rather than dropping them): it cannot train what they ask."""

_announced: set[str] = set()
"""The old keys this process has named in a note already."""


class MovedKey(NamedTuple):
    """One old key met in a layer."""

    old: str
    """'network.policy_hidden'."""
    new: str
    """'ppo.policy_hidden'."""
    outranked: bool
    """The same layer gave the new key too (it wins)."""
    dropped: bool
    """The run's algorithm does not read the key (its new section is another algorithm's)."""


def rewrite_layers(layers: Sequence[Mapping[str, Any]], algo: str) -> tuple[list[Mapping[str, Any]], list[MovedKey]]:
    """`layers` with every old key moved to its new section (algo ppo) or dropped (another algo), and the old keys
    met; UserError for a non-zero `network.bottleneck` with another algorithm."""
    rewritten, met = [], []
    for layer in layers:
        new_layer, moved = _rewrite_layer(layer, algo)
        rewritten.append(new_layer)
        met += moved
    return rewritten, met


def _rewrite_layer(layer: Mapping[str, Any], algo: str) -> tuple[Mapping[str, Any], list[MovedKey]]:
    sections = {section: keys for section, keys in layer.items()}
    met = []
    for old, new in MOVED_KEYS.items():
        old_section, key = old.split(".")
        new_section, new_key = new.split(".")
        keys = sections.get(old_section)
        if not isinstance(keys, Mapping) or key not in keys:
            continue
        value = keys[key]
        sections[old_section] = {k: v for k, v in keys.items() if k != key}
        target = sections.get(new_section)
        outranked = isinstance(target, Mapping) and new_key in target
        met.append(MovedKey(old, new, outranked, new_section != algo))
        if new_section == algo:
            if not outranked:
                sections[new_section] = {**(target if isinstance(target, Mapping) else {}), new_key: value}
        elif old in REFUSED_ELSEWHERE and to_type(old, int, value):
            raise UserError(f"{old} is a {title(new_section)} option ({new}; {title(algo)}'s policy has no latent "
                            f"layer); set {old}: 0 or use algo: {new_section}")
    return sections, met


def announce(met: Sequence[MovedKey]) -> None:
    """One line on stderr naming the old keys in `met` that this process has not named yet (none: no line)."""
    fresh = [moved for moved in dict.fromkeys(met) if moved.old not in _announced]
    if not fresh:
        return
    _announced.update(moved.old for moved in fresh)
    olds = list(dict.fromkeys(moved.old for moved in fresh))
    news = [MOVED_KEYS[old] for old in olds]
    outranked = list(dict.fromkeys(moved.new for moved in fresh if moved.outranked))
    both = f"; {', '.join(outranked)} given too, so the new name wins" if outranked else ""
    unread = "; this run's algorithm does not read them (as before)" if any(moved.dropped for moved in fresh) else ""
    print(f"rlfit: note: {', '.join(olds)} {'is' if len(olds) == 1 else 'are'} now {', '.join(news)}; the old "
          f"names still work{both}{unread}", file=sys.stderr, flush=True)


def forget_announced() -> None:
    """Lets the next note name every old key again (tests; a process prints one note)."""
    _announced.clear()
