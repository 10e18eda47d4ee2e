"""The prose of each language (``lang/<lang>.toml``) and its phrases, filled and escaped for a format."""

from __future__ import annotations

import string
import tomllib
import unicodedata
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

    def __init__(
        self,
        prose: Mapping[str, Any],
        escape: Callable[[str], str],
        lang: str,
        list_break: str = "",
        label_escape: Callable[[str], str] | None = None,
    ):
        self.prose = prose
        self.escape = escape
        self.label_escape = label_escape or escape  # labels in prose: LaTeX breaks a long one
        self.lang = lang
        # after a list separator with no space ("、"): where the line may break (xeCJK breaks none of "」、「")
        self.list_break = list_break

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
        out = ""
        for literal, name, _spec, _conv in string.Formatter().parse(phrase):
            out = self.join(out, self.escape(literal))
            if name is not None:
                if name not in values:
                    raise RenderError(f"phrase {phrase!r} needs a value for {{{name}}}")
                out = self.join(out, str(values[name]))
        return out

    def join(self, left: str, right: str) -> str:
        """Two pieces of prose, spaced as the language spaces them where they meet.

        A value's first or last character decides the space around it, which its phrase cannot know:
        Chinese puts one space between a Han character and Latin text or maths ("第 2 个头的 MLA"),
        and none next to its own punctuation or between two Han characters ("「茶」这一行").
        """
        if not self.prose.get("cjk_spacing"):
            return left + right
        head, tail = left.rstrip(" "), right.lstrip(" ")
        if not head or not tail:
            return left + right
        kinds = {_kind(head, end=True), _kind(tail, end=False)}
        if "mark" in kinds or kinds == {"han"}:
            return head + tail
        return head + " " + tail if kinds == {"han", "latin"} else left + right

    def quoted(self, labels: list[str]) -> str:
        """Labels, each escaped and quoted, joined as the language lists things."""
        sep = self.escape(self.raw("list_sep"))
        sep += "" if sep.endswith(" ") else self.list_break
        return sep.join(self("quote", x=self.label_escape(label)) for label in labels)

    def count(self, n: int) -> str:
        words = self.prose.get("numbers", [])
        return words[n] if n < len(words) else str(n)


def _kind(text: str, end: bool) -> str:
    """What a piece of text meets its neighbour with: a Han character, a CJK mark, Latin text or maths."""
    if text.endswith("\\)") if end else text.startswith("\\("):  # LaTeX's inline maths
        return "latin"
    ch = text[-1] if end else text[0]
    if unicodedata.east_asian_width(ch) in "WF":
        return "mark" if unicodedata.category(ch)[0] in "PS" else "han"
    letter = ch.isalnum() and unicodedata.category(ch)[0] in "LN"
    return "latin" if letter or ch == "$" else "other"
