"""TOML written by symattn (answers files, specs from the web page): values and keys, escaped as TOML wants.

Numbers are written as the reader will read them back: a number's text bare (``numbers=True``,
exactly as typed; the reader keeps a float's text) or as a string, never through float().
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_NUMBER = re.compile(r"[+-]?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def toml_string(text: str) -> str:
    # JSON's escapes are TOML's, but for DEL, which TOML wants escaped too
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_value(value: Any, numbers: bool = False) -> str:
    """A value inline; with ``numbers``, a string that is a decimal number ("0.5") is written bare (0.5)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        # "1/3" stays a string either way
        return value if numbers and _NUMBER.fullmatch(value) else toml_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(x, numbers) for x in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(x, numbers)}" for k, x in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else toml_string(key)


__all__ = ["toml_key", "toml_string", "toml_value"]
