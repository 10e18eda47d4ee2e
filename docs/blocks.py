"""The generated pieces of the docs, committed in place between their markers (in the manner of cog), so a
page reads whole where it is stored, and the site is built from the same text:

    <!-- symattn: NAME -->

    … what docs/hooks.py makes for NAME …

    <!-- end symattn: NAME -->

``python docs/hooks.py --write`` fills every block (and a bare begin marker) with what symattn makes now;
``python docs/hooks.py --check`` lists the blocks that differ and exits 1, as ``cog --check`` does; the
site's build checks the same and stops on a stale block. The markers are HTML comments: a forge shows
nothing of them, and the build drops them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

BEGIN = re.compile(r"^<!-- symattn: ([a-z0-9-]+) -->$", re.MULTILINE)
END = "<!-- end symattn: {name} -->"


def block(name: str, body: str) -> str:
    """A block as it is committed: its markers, and its body between blank lines."""
    return f"<!-- symattn: {name} -->\n\n{body.strip(chr(10))}\n\n" + END.format(name=name)


def blocks(text: str) -> list[tuple[str, int, int, str | None]]:
    """(name, start, end, body) of each block, in page order; body None for a begin marker with no end
    marker after it (a bare placeholder: start to end is the marker alone)."""
    out = []
    for m in BEGIN.finditer(text):
        name = m.group(1)
        end = text.find("\n" + END.format(name=name), m.end())
        nearest = BEGIN.search(text, m.end())
        if end < 0 or (nearest is not None and nearest.start() < end):
            out.append((name, m.start(), m.end(), None))
            continue
        stop = end + 1 + len(END.format(name=name))
        out.append((name, m.start(), stop, text[m.end() : end].strip("\n")))
    return out


def filled(text: str, made: Mapping[str, str]) -> str:
    """The page with every block (bare markers too) holding what was made; an unknown name is a KeyError."""
    parts, last = [], 0
    for name, start, end, _ in blocks(text):
        parts += [text[last:start], block(name, made[name])]
        last = end
    return "".join(parts) + text[last:]


def stale(text: str, made: Mapping[str, str]) -> list[str]:
    """The names of the blocks whose body is not what was made now (bare markers included)."""
    return [name for name, _, _, body in blocks(text) if body is None or body != made.get(name, "").strip("\n")]


def unmarked(text: str) -> str:
    """The page as the site shows it: the markers dropped, the bodies kept."""
    text = BEGIN.sub("", text)
    return re.sub(r"^<!-- end symattn: [a-z0-9-]+ -->$", "", text, flags=re.MULTILINE)


__all__ = ["block", "blocks", "filled", "stale", "unmarked"]
