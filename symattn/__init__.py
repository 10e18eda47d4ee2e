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
    "attention": "api",
    "solve": "api",
    "Result": "api",
    "load_spec": "input.spec",
    "Spec": "input.spec",
    "Decimals": "input.spec",
    "build_model": "exact.heads",
    "Model": "exact.model",
    "build": "exact.factory",
    "AttentionModel": "exact.base",
    "BackwardModel": "exact.backward",
    "derive": "derivation.derive",
    "Derivation": "derivation.steps",
    "render": "rendering.renderer",
    "render_report": "rendering.renderer",
    "check": "checking.checker",
    "Report": "checking.report",
    "report_data": "checking.report",
    "load_claims": "input.claims",
    "Claims": "input.claims",
    "compute": "derivation.intermediates",
    "exercise": "classroom.exercises",
    "Variant": "classroom.variants",
    "grade": "classroom.grading",
    "Gradebook": "classroom.grading",
    "quiz_file": "classroom.lms",
    "grade_lms": "classroom.lmsgrade",
    "compare": "kernel.oracle",
    "Comparison": "kernel.comparison",
    "read_result": "input.floats",
    "SymattnError": "input.errors",
    "SpecError": "input.errors",
    "ShapeError": "input.errors",
    "EvaluationError": "input.errors",
    "RenderError": "input.errors",
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
