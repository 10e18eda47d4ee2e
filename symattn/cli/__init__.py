"""The command line: a thin shell over the public functions."""

from symattn.cli.commands import main, run

__all__ = ["main", "run"]
