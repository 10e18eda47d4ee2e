"""symattn: exact, step-by-step derivations of Transformer attention.

    >>> import symattn
    >>> r = symattn.attention([[1, 0]], [[1, 0]], [[2, 3]], tokens=["a"])
    >>> r.model.weights
    Matrix([[1]])

Names are imported on first use, so that ``symattn --help`` stays fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "attention": "api", "solve": "api", "Result": "api",
    "load_spec": "spec", "Spec": "spec", "Decimals": "spec",
    "build_model": "model", "Model": "model", "build": "model", "AttentionModel": "model",
    "BackwardModel": "backward",
    "derive": "derivation", "Derivation": "derivation",
    "render": "renderer", "render_report": "renderer",
    "check": "checker", "Report": "checker", "report_data": "checker",
    "load_claims": "claims", "Claims": "claims",
    "compute": "intermediates",
    "exercise": "exercises", "Variant": "exercises", "grade": "grading", "Gradebook": "grading",
    "compare": "compare", "Comparison": "compare", "read_result": "floats",
    "SymattnError": "errors", "SpecError": "errors", "ShapeError": "errors",
    "EvaluationError": "errors", "RenderError": "errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'symattn' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
