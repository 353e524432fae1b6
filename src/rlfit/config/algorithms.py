"""The algorithms rlfit knows: name -> the package that holds the algorithm (`rlfit.algos.registry.algorithm`
loads its contract).

Each package has `config.py` (pure Python, an `AlgorithmConfig`: `SECTION`, the frozen
dataclass of its config section named like the algorithm; `PRESETS`; `published(env_name)`, MuJoCo
Playground's settings as a config layer; `check(config)`) and `algorithm.py` (`ALGORITHM`, an
`rlfit.algos.contract.Algorithm`; imports JAX).

rlfit's own algorithms are listed below. An algorithm defined elsewhere becomes known by
`register_algorithm(name, package)` (in a script or notebook, before its config is resolved) or, for the
command line (`rlfit.cli.main` reads it), by the environment variable `RLFIT_ALGORITHMS=name=package[,...]`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from types import ModuleType
from typing import Any, Protocol, cast


class AlgorithmConfig(Protocol):
    """An algorithm's pure-Python `config` module (no JAX): read while a config is resolved and checked."""

    SECTION: type
    """The frozen dataclass of its config section, named like the algorithm (`config.<name>`)."""
    TITLE: str
    """How the documentation and the command line's help write the algorithm's name ('PPO', 'FastTD3'); optional:
    without it, its registered name."""
    PRESETS: Mapping[str, Mapping[str, Mapping[str, Any]]]
    """preset name -> config layer ({section: {key: value}}); 'default' at least."""

    def published(self, env_name: str) -> dict[str, dict[str, Any]]:
        """MuJoCo Playground's published settings for `env_name` as a config layer ({} where none)."""

    def check(self, config: Any) -> None:
        """Raises a one-line `rlfit.errors.UserError` for a value the algorithm cannot train with. `config` is a
        resolved `rlfit.config.schema.Config` (typed Any here: the schema imports this module)."""



ALGORITHMS = {
    "ppo": "rlfit.algos.ppo",
    "sac": "rlfit.algos.sac",
    "fasttd3": "rlfit.algos.fasttd3",
}
DEFAULT_ALGORITHM = "ppo"
ENVIRONMENT_VARIABLE = "RLFIT_ALGORITHMS"
RESERVED = ("algo", "algos", "env", "network", "run")
"""Names an algorithm cannot take: the config's own keys and sections."""


def register_algorithm(name: str, package: str) -> None:
    """Makes the algorithm in `package` (an importable module path with `config` and `algorithm` modules) known
    as `name`: the value of `algo` and its config section's name. Registering the same pair again does nothing;
    a name that is taken, reserved or not an identifier is a UserError."""
    from rlfit.errors import UserError

    if not name.isidentifier() or name in RESERVED:
        raise UserError(f"'{name}' cannot name an algorithm (it must be an identifier other than "
                        f"{', '.join(RESERVED)}); pick another name")
    if ALGORITHMS.get(name, package) != package:
        raise UserError(f"the algorithm name '{name}' is taken by {ALGORITHMS[name]}; pick another name")
    ALGORITHMS[name] = package


def unregister_algorithm(name: str) -> None:
    """Forgets an algorithm `register_algorithm` added (rlfit's own stay)."""
    if name not in ("ppo", "sac", "fasttd3"):
        ALGORITHMS.pop(name, None)


def register_from_environment(value: str | None = None) -> None:
    """Registers every `name=package` of `value` (default: $RLFIT_ALGORITHMS, comma-separated)."""
    from rlfit.errors import UserError

    value = os.environ.get(ENVIRONMENT_VARIABLE, "") if value is None else value
    for item in filter(None, (part.strip() for part in value.split(","))):
        name, separator, package = item.partition("=")
        if not separator or not package.strip():
            raise UserError(f"{ENVIRONMENT_VARIABLE} holds '{item}'; write name=package (e.g. td3=my_pkg.td3)")
        register_algorithm(name.strip(), package.strip())


def title(name: str) -> str:
    """The algorithm's name as people write it: its config module's `TITLE` ('FastTD3'), else `name`."""
    return str(getattr(config_module(name), "TITLE", name))


def titles_in_words(conjunction: str = "or") -> str:
    """Every registered algorithm's title, in registration order, as a sentence writes them: 'PPO, SAC or
    FastTD3' (the command line's help and descriptions are built from it, so none is left out)."""
    names = [title(name) for name in ALGORITHMS]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {conjunction} {names[-1]}"


def config_module(name: str) -> AlgorithmConfig:
    """The algorithm's `config` module (its section, presets, published settings and rules)."""
    return cast("AlgorithmConfig", algorithm_module(name, "config"))


def algorithm_module(name: str, module: str) -> ModuleType:
    """`<package>.<module>` of algorithm `name`; a registered package that does not exist is a UserError."""
    from rlfit.errors import UserError

    package = ALGORITHMS[name]
    try:
        return importlib.import_module(f"{package}.{module}")
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if not f"{package}.{module}".startswith(missing):  # a module the algorithm's own code imports: its bug
            raise
        raise UserError(f"algorithm '{name}' is registered as {package}, but {missing} cannot be imported; install "
                        f"it or fix the name (register_algorithm, ${ENVIRONMENT_VARIABLE})") from None
