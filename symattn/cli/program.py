"""``symattn`` as a program (the console script, ``python -m symattn``): :func:`symattn.cli.commands.main`,
with the garbage collector kept off SymPy's objects, which live as long as the process does."""

from __future__ import annotations

import gc
import sys

from symattn.cli.commands import main
from symattn.cli.parser import command_named


def run() -> int:
    """The command line's exit code, as :func:`main` gives it."""
    if command_named(sys.argv[1:]) == "render":  # it imports SymPy next in any case
        import sympy  # noqa: F401

        # SymPy leaves some 60,000 objects; a full collection during the command walks them all, 60 ms
        # and more (issue 29's start-up). gc.freeze() puts the objects alive now out of its reach.
        gc.freeze()
    code = main()
    # What the command wrote is written and closed (files through os-level writes; stdout is flushed at
    # exit all the same). The collection Python makes as it shuts down would walk every object, to free
    # memory the ending process gives back anyway. Never in main(): a caller's process (a test session)
    # goes on, and would keep its garbage.
    gc.freeze()
    return code
