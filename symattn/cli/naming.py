"""Which format a file's name asks for: ``-o x.tex`` is LaTeX, ``-o x.md`` Markdown, where --format is not given."""

from __future__ import annotations

import os

# a name of another suffix takes the command's default
SUFFIXES = {
    ".pdf": "pdf",
    ".html": "html",
    ".htm": "html",
    ".md": "markdown",
    ".markdown": "markdown",
    ".tex": "latex",
    ".json": "json",
    ".csv": "csv",
    ".txt": "text",
}

# the formats -o's name may ask for, each command's (its default aside): the one list --help gives
NAMED = {
    "render": ("latex", "pdf", "html"),
    "check": ("json", "markdown", "latex", "pdf", "html"),
    "grade": ("markdown", "json", "latex", "html", "pdf"),
}


def suffixes(command: str) -> str:
    """The suffixes of -o's names that ask for one of the command's formats: ".tex, .pdf, .html"."""
    return ", ".join(s for f in NAMED[command] for s in SUFFIXES if SUFFIXES[s] == f and s not in (".htm", ".markdown"))


def named_format(output: str | None, default: str, formats: tuple[str, ...]) -> tuple[str, str]:
    """(the format -o's name says among a command's ``formats``, else ``default``; "") or (default, the
    problem): a name whose suffix is a format the command does not write would hold what its name denies."""
    suffix = os.path.splitext(output or "")[1].lower()
    said = SUFFIXES.get(suffix)
    if said is None or said == default:
        return default, ""
    if said not in formats:
        writes = ", ".join((default, *formats))
        return default, f"-o {suffix}: this command writes no {said} ({writes}); give --format"
    return said, ""


__all__ = ["NAMED", "SUFFIXES", "named_format", "suffixes"]
