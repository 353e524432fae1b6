"""The user's own code named as `module:function` (an environment factory, a randomizer): imported once, checked,
and every failure one line naming the setting and the fix."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from rlfit.errors import UserError


def import_callable(reference: str, setting: str, kind: str = "function", expected: str = "") -> Callable[..., Any]:
    """The callable `reference` ('module:function') names. `setting` starts each message ('env.randomization',
    "environment 'pkg:make'"), `kind` names what is missing ('function', 'callable') and `expected` (optional) says
    what the user should give instead."""
    module_name, _, name = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise UserError(f"{setting}: cannot import module '{module_name}': {error}; check the name and that it is "
                        "on PYTHONPATH") from None
    found = getattr(module, name, None)
    if not callable(found):
        advice = f"; {expected}" if expected else ""
        raise UserError(f"{setting}: module '{module_name}' has no {kind} '{name}'{advice}")
    return found
