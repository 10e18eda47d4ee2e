"""What a spec's input files bring beside its matrices: how their axes were laid out, the batches past the
first, and the path of each file, which a certificate binds.

The float64 path of ``compare`` and the certificates read it; a derivation never does. A spec given as
rows has none of it (:data:`NO_FILES`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from symattn.input.records import record

if TYPE_CHECKING:
    from symattn.input.reader import Matrix


@record
class KernelInputs:
    layout: str = "bhnd"  # or "bnhd": the order of the files' axes (and of a result's)
    batches: tuple[tuple[Matrix, Matrix, Matrix], ...] = ()  # every batch's (Q, K, V) matrices; empty: one batch
    sources: tuple[tuple[str, str], ...] = ()  # (key, path) of each input read from a file
    grad_outputs: tuple[Matrix, ...] = ()  # [backward]'s dO of every batch past the first, (N, H·dv) each

    @property
    def batch(self) -> int:
        """Batches of Q, K, V (files with a batch axis): compare takes them all, everything else one."""
        return max(1, len(self.batches))


NO_FILES = KernelInputs()

__all__ = ["NO_FILES", "KernelInputs"]
