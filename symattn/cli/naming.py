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


__all__ = ["SUFFIXES", "named_format"]
