"""Where the templates and their prose files (``lang/<lang>.toml``) are, and which languages exist.

The spec reader needs the language names; it finds them here, not in the renderer.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]
# An installed wheel carries the templates inside the package; a checkout keeps
# them at the top level.
TEMPLATE_PATHS = (_PACKAGE / "templates", _PACKAGE.parent / "templates")


def languages() -> list[str]:
    """Every language with a prose file."""
    found = {
        p.stem for folder in TEMPLATE_PATHS if (folder / "lang").is_dir() for p in (folder / "lang").glob("*.toml")
    }
    return sorted(found)
