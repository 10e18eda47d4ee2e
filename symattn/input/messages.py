"""The words of an input error, in a language: English on the command line, the page's own language in
``symattn serve`` (its worker words each request's errors in the language the page asked in).

An error says ``said(code, **fields)``: the phrase ``[error].<code>`` of ``templates/lang/<lang>.toml``
with its fields filled in. The fields are the user's text as the message echoes it (quoted and cut by
:func:`~symattn.input.errors.brief`) and numbers, never wording: so the page's language changes the words
only, and a test can match a message exactly in each language.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_LANGUAGE: ContextVar[str] = ContextVar("symattn_message_language", default="en")


@contextmanager
def messages_in(lang: str) -> Iterator[None]:
    """Errors raised inside are worded in ``lang`` (one of the languages with a prose file; else English)."""
    from symattn.input.languages import languages

    token = _LANGUAGE.set(lang if lang in languages() else "en")
    try:
        yield
    finally:
        _LANGUAGE.reset(token)


def message_language() -> str:
    return _LANGUAGE.get()


def said(code: str, **fields: object) -> str:
    """The phrase of an error in the current language, its fields filled in."""
    from symattn.rendering.phrases import load_language  # the prose files: read once, cached

    phrase = load_language(_LANGUAGE.get())["error"][code]
    return phrase.format_map({k: str(v) for k, v in fields.items()})


__all__ = ["message_language", "messages_in", "said"]
