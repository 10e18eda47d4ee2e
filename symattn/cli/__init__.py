"""The command line: a thin shell over the public functions."""

from symattn.cli.commands import main
from symattn.cli.program import run

__all__ = ["main", "run"]
