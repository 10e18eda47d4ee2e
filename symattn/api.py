"""The Python API: one call from numbers to a rendered derivation."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any

from symattn.derivation.derive import derive
from symattn.derivation.steps import Derivation
from symattn.exact.base import AttentionModel
from symattn.exact.factory import build
from symattn.input.records import record
from symattn.input.spec import Spec, load_spec


@record(eq=False)
class Result:
    """A spec with its exact model and derivation, computed on first use."""

    spec: Spec

    @cached_property
    def model(self) -> AttentionModel:
        """The exact model (:func:`~symattn.exact.factory.build`): one head, several heads (or W_O), symbols,
        or the backward pass over one of them."""
        return build(self.spec)

    @cached_property
    def derivation(self) -> Derivation:
        return derive(self.spec, self.model)

    def render(self, format: str = "markdown", *, standalone: bool = False) -> str:
        """The derivation in a text format: markdown, latex (``standalone``: a whole document), html, beamer
        or slides (:mod:`symattn.rendering.export`)."""
        from symattn.rendering.export import export, format_of

        format_of(self.derivation, format, text=True)  # a PDF is pdf()'s: its bytes are no text
        return export(self.derivation, format, standalone=standalone).text

    def pdf(self, engine: str | None = None) -> bytes:
        """The derivation as a PDF (latexmk; xelatex for Chinese and labels beyond Latin-1), for notebooks
        whose own PDF export cannot set them."""
        from symattn.rendering.export import export

        return export(self.derivation, "pdf", engine=engine).data

    def compute(self, digits: int = 15, exact: bool = True) -> dict[str, Any]:
        """Every intermediate to ``digits`` significant digits; ``exact=False`` leaves out the closed forms,
        whose printing is most of the time with a tanh cap or a long sum."""
        from symattn.derivation.intermediates import compute

        return compute(self.spec, self.model, digits, exact)

    def _repr_markdown_(self) -> str:
        return self.render("markdown")

    def _repr_latex_(self) -> str:
        # a fragment: nbconvert places it as is in a LaTeX document
        return self.render("latex")


def attention(Q: Any, K: Any, V: Any, **settings: Any) -> Result:
    """Exact attention of Q, K, V (lists of rows of ints, strings, Fractions, Decimals).

    ``settings`` are the other spec keys: tokens, focus, title, lang, scale,
    rounding, expand, decimals.
    """
    return Result(load_spec({"Q": Q, "K": K, "V": V, **settings}))


def solve(spec: str | Mapping[str, Any] | Spec) -> Result:
    """A Result from a spec file path, a mapping of spec keys, or a Spec."""
    return Result(load_spec(spec))
