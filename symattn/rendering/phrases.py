"""The prose of each language (``lang/<lang>.toml``) and its phrases, filled and escaped for a format."""

from __future__ import annotations

import string
import tomllib
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from symattn.input.errors import RenderError
from symattn.input.languages import TEMPLATE_PATHS
from symattn.rendering.user_cache import parsed


@cache
def load_language(lang: str) -> Mapping[str, Any]:
    """The prose of one language, from the first ``lang/<lang>.toml`` found."""
    for folder in TEMPLATE_PATHS:
        path = folder / "lang" / f"{lang}.toml"
        if path.is_file():
            prose = parsed(path, tomllib.loads)
            # the gradients' names live in [backward.quantity]; reports find every name under "quantity"
            extra = prose.get("backward", {}).get("quantity", {})
            return {**prose, "quantity": {**prose.get("quantity", {}), **extra}} if extra else prose
    searched = ", ".join(str(p / "lang") for p in TEMPLATE_PATHS)
    raise RenderError(f"no language {lang!r}: lang/{lang}.toml not found; searched {searched}")


class Phrases:
    """``t(key, **values)``: a phrase with its literal text escaped for the format.

    Values must already be in the target format (escaped labels, math spans).
    """

    def __init__(self, prose: Mapping[str, Any], escape: Callable[[str], str], lang: str):
        self.prose = prose
        self.escape = escape
        self.lang = lang

    def raw(self, key: str) -> Any:
        node: Any = self.prose
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                raise RenderError(f"language {self.lang!r} has no phrase {key!r}")
            node = node[part]
        return node

    def __call__(self, key: str, **values: Any) -> str:
        return self.fill(self.raw(key), **values)

    def fill(self, phrase: str, **values: Any) -> str:
        out = []
        for literal, name, _spec, _conv in string.Formatter().parse(phrase):
            out.append(self.escape(literal))
            if name is not None:
                if name not in values:
                    raise RenderError(f"phrase {phrase!r} needs a value for {{{name}}}")
                out.append(str(values[name]))
        return "".join(out)

    def quoted(self, labels: list[str]) -> str:
        """Labels, each escaped and quoted, joined as the language lists things."""
        sep = self.escape(self.raw("list_sep"))
        return sep.join(self("quote", x=self.escape(label)) for label in labels)

    def count(self, n: int) -> str:
        words = self.prose.get("numbers", [])
        return words[n] if n < len(words) else str(n)
