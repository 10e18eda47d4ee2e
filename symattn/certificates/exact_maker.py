"""What ``compute --certify`` adds to a head's values (version 1, the exact path): which spec it covers,
and the ``certificate`` section that :mod:`symattn.certificates.exact_verifier` re-checks on its own."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any, cast

from symattn import variants
from symattn.exact.base import AttentionModel
from symattn.exact.factory import build
from symattn.exact.model import Model
from symattn.input.errors import SpecError
from symattn.input.reader import is_numbers
from symattn.input.spec import Matrix, Spec


def certified_head(spec: Spec, model: AttentionModel | None = None) -> Model:
    """The one head a certificate (version 1) is of: what ``--certify`` does not cover is refused in one line.
    The verifier asks the same of the spec a certificate names."""
    model = build(spec) if model is None else model
    if model.kind != "head":
        raise SpecError(spec.source, None, "--certify covers one head without symbols or --backward")
    refused = variants.certify_refusal(spec)  # its re-check knows z = S·scale of rational scores only
    if refused is not None:
        raise SpecError(spec.source, *refused)
    return cast(Model, model)  # kind "head" is one Model


CERTIFIED = ("scale", "sqrt_dk", "scores", "scaled", "exp", "exp_sum", "weights", "output")


def certificate_section(
    spec: Spec, model: Model, out: dict[str, Any], digits: int, files: list[dict[str, str]]
) -> dict[str, Any]:
    """The ``certificate`` section: how the bounds were found, the exact inputs they follow from, the values
    known to be rational, and ``files``, the spec's files with their SHA-256 (made by the caller)."""

    def exact(m: Matrix) -> list[list[str]]:
        assert is_numbers(m)  # a certificate is of one head without symbols
        return [[str(x.value) for x in row] for row in m]

    bits = 0
    for name in CERTIFIED:
        rows = out[name]["bounds"]
        for bound in (
            rows
            if isinstance(rows[0], list) and isinstance(rows[0][0], list)
            else [rows]
            if isinstance(rows[0], list)
            else [[rows]]
        ):
            for lo, _ in bound:
                if lo != "-inf":
                    bits = max(bits, Fraction(Decimal(lo)).denominator.bit_length() - 1)  # past int(str)'s limit
    scale = spec.scale if spec.scale == "sqrt" else "1" if spec.scale == "none" else str(spec.scale.value)
    rational = {}
    for name in CERTIFIED:
        table = [[None if x is None else str(x) for x in row] for row in model.rationals(name)]
        # shaped as the values are: scalars, a column as a list, matrices
        rational[name] = (
            table[0][0] if name in ("scale", "sqrt_dk") else [row[0] for row in table] if name == "exp_sum" else table
        )
    balls = "python-flint arb balls for exp" if model.numeric_engine == "flint" else "mpmath for exp"
    return {
        "method": f"interval arithmetic at a fixed binary point (mpmath intervals for √d_k, {balls}, exact "
        "integers for sums and products); rationals exactly",
        "precision_bits": bits,
        "digits": digits,
        "inputs": {"Q": exact(spec.Q), "K": exact(spec.K), "V": exact(spec.V), "scale": scale},
        "rational": rational,
        # the SHA-256 of the spec file and of any input file it names: the certificate binds to them
        "files": files,
    }


__all__ = ["CERTIFIED", "certificate_section", "certified_head"]
