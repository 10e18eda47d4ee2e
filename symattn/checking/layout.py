"""Where each claimed quantity lives: one head's model or the layer's, its name there, and its labels.

A claim names a quantity, maybe a head (``h2.weights``), and an entry. :class:`Layout` answers, for
any of them, whose exact numbers it is compared with (a head's model, the multi-head layer, the
backward pass or one head's view of it), under which name (``rowsum`` is the backward model's
``dot``; with the stable softmax ``exp`` is ``exp_shifted``), and what its rows and columns are
called in a report (a token, a key, a column, an input dimension).
"""

from __future__ import annotations

from dataclasses import replace
from functools import cached_property
from typing import Any

from symattn import variants
from symattn.exact.model import Model
from symattn.input.groups import group_of
from symattn.input.quantities import (
    GRADIENTS,
    HEAD_BACKWARD,
    HEAD_FORWARD,
    INPUTS,
    SHARED,
    SHARED_PARTS,
    is_multihead,
    labels,
)
from symattn.input.spec import Spec


class Layout:
    """One spec's heads and layer: the models, the head specs, and the column offsets of each head."""

    def __init__(self, spec: Spec, model: Any):
        self.spec = spec
        self.forward = model.forward  # a Model (one head) or a MultiHead
        self.backward = model.backward  # the backward model, or None
        self.multihead = is_multihead(spec)
        self.heads: tuple[Model, ...] = getattr(self.forward, "heads", None) or (self.forward,)
        self.stable = spec.softmax == "stable"
        self._views: dict[tuple[str, int], Any] = {}

    @cached_property
    def head_specs(self) -> tuple[Spec, ...]:
        """Each head's spec: its own columns of Q, K and V (the spec itself for one head)."""
        if not self.multihead:
            return (self.spec,)
        return tuple(self.spec.head(h) for h in range(self.spec.heads))

    @property
    def width_q(self) -> int:
        """The columns of Q and K each head takes."""
        return len(self.spec.Q[0]) // self.spec.heads

    @property
    def width_v(self) -> int:
        """The columns of V (and of each head's output) each head takes."""
        return len(self.spec.V[0]) // self.spec.kv_groups

    def kv_index(self, head: int) -> int:
        """The key/value head whose columns of K and V a query head takes (itself, without grouping)."""
        return group_of(head, self.spec.heads, self.spec.kv_groups)

    def group(self, kv: int) -> range:
        """The query heads that share key/value head ``kv`` (just ``kv``, without grouping)."""
        size = self.spec.heads // self.spec.kv_groups
        return range(kv * size, (kv + 1) * size)

    @staticmethod
    def index(head: int | None) -> int:
        """The head a quantity belongs to: one head's claims carry none."""
        return 0 if head is None else head

    def is_layer(self, quantity: str, head: int | None) -> bool:
        """A quantity of the whole layer (concat, the output after W_O, dO, the heads' dQ side by side, ...),
        not of one head. With one head and no W_O, the head is the layer: everything is the head's."""
        if quantity in INPUTS + SHARED:
            return True
        if not self.multihead:  # dO comes from the loss, before any head
            return quantity == "dO" or quantity not in HEAD_FORWARD + HEAD_BACKWARD
        return head is None and quantity not in SHARED_PARTS  # a shared one is any head's (the first's)

    def model(self, quantity: str, head: int | None) -> Any:
        """The model whose exact numbers a claim is compared with (None for the inputs Q, K, V)."""
        if quantity in INPUTS:
            return None
        if quantity in SHARED:
            return self.heads[0]
        gradient = quantity in GRADIENTS
        if self.is_layer(quantity, head):
            return self.backward if gradient else self.forward
        if gradient:
            assert self.backward is not None  # gradient claims need [backward] (the checker says so)
            return self.backward.head_views[self.index(head)] if self.multihead else self.backward
        if quantity in variants.VIEWED:  # the softmax's route: a view of the head (the keys in blocks)
            return self.view(quantity, head)
        return self.heads[self.index(head)]

    def view(self, quantity: str, head: int | None) -> Any:
        key = (quantity, self.index(head))
        if key not in self._views:
            self._views[key] = variants.view(self.head_specs[key[1]], quantity, self.heads[key[1]])  # its own setting
        return self._views[key]

    def name(self, quantity: str) -> str:
        """A claim's quantity as the model names it."""
        if quantity == "percent":
            return "weights"
        if quantity == "rowsum":
            return "dot"
        if self.stable and quantity in ("exp", "exp_sum"):  # what the document shows: e^(z − max)
            return {"exp": "exp_shifted", "exp_sum": "exp_shifted_sum"}[quantity]
        return quantity

    def unmasked(self, head: int | None) -> Model:
        """A head without its mask: what a score printed before masking is compared with."""
        return self._unmasked[self.index(head)]

    @cached_property
    def _unmasked(self) -> tuple[Model, ...]:
        return tuple(replace(h, allowed=None) for h in self.heads)

    def labels(self, quantity: str, row: int | None, col: int | None) -> tuple[Any, Any, str | None, str | None]:
        """(row label, column label, row axis, column axis): a token or key label, or a 1-based number."""
        return labels(self.spec, quantity, row, col)


__all__ = ["Layout"]
