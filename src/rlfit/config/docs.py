"""Every config key with its default and meaning, read from the config dataclasses themselves: each field's
attribute docstring (the string literal under it) and its default.

The one source of `rlfit keys`, of `rlfit keys --markdown` and of the documentation's configuration page (whose
key table tools/docs_hooks.py generates when mkdocs builds the site), so no list of keys is kept by hand anywhere.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import textwrap
from typing import Any, NamedTuple

import yaml

from rlfit.config.algorithms import ALGORITHMS
from rlfit.config.schema import Config, section_types
from rlfit.config.values import plain


class KeyDoc(NamedTuple):
    """One config key: `section.key` (or `algo`), rlfit's own default and the docstring on one line."""

    key: str
    default: Any
    meaning: str


def attribute_docs(cls: type) -> dict[str, str]:
    """field name -> the docstring under it in `cls`'s source, whitespace collapsed to single spaces."""
    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, after in itertools.pairwise(body):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def key_docs() -> list[KeyDoc]:
    """`algo`, then every key of every section (env, each algorithm's, network, run) in the dataclasses' order,
    with rlfit's own default (Playground's published settings and presets come on top) and meaning."""
    algos = ", ".join(f"`{name}`" for name in ALGORITHMS)  # from the registry, so no algorithm is left out
    rows = [KeyDoc("algo", Config().algo, f"{attribute_docs(Config).get('algo', '')} One of {algos}.")]
    for section, cls in section_types().items():
        docs, defaults = attribute_docs(cls), plain(dataclasses.asdict(cls()))
        rows += [KeyDoc(f"{section}.{field.name}", defaults[field.name], docs.get(field.name, ""))
                 for field in dataclasses.fields(cls)]
    return rows


def default_text(value: Any) -> str:
    """A default as a user writes it in YAML or `--set`: `true`, `null`, `[32, 32]`, `{}`, `''`, `0.001`."""
    return yaml.safe_dump(value, default_flow_style=True, width=10**9).strip().removesuffix("...").strip()


def markdown_table() -> str:
    """The key table in Markdown: key, default, meaning; one row per key of `key_docs`, ending in a newline."""
    lines = ["| key | default | meaning |", "| --- | --- | --- |"]
    for row in key_docs():
        meaning = row.meaning.replace("|", "\\|")
        lines.append(f"| `{row.key}` | `{default_text(row.default)}` | {meaning} |")
    return "\n".join(lines) + "\n"


def plain_table() -> str:
    """The key table for a terminal: key, default, meaning, one line per key (as `rlfit keys` prints it)."""
    rows = key_docs()
    width = max(len(row.key) for row in rows) + 2
    default_width = max(len(default_text(row.default)) for row in rows) + 2
    return "".join(f"{row.key:{width}s}{default_text(row.default):{default_width}s}{row.meaning}\n" for row in rows)
