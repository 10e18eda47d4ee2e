"""One case of a sweep, as a Dask worker runs it: its inputs from the seed, the kernel, its backward, the
naive reference for FlashAttention's rule, and each kind judged by ``symattn.kernel.compare``.

A case's row is plain data (JSON): the grid point, ``verdict`` "pass" or "fail", the deciding check's kind,
figure and place, every check, the seconds it took and the worker that ran it. What the kernel or the engine
does wrong is the row's, never an exception: a kernel that raises or returns no LSE, an engine that refuses
a variant not yet on its float64 path (its one line, as ``compare`` says it).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import time
from functools import lru_cache
from typing import Any

from symattn import variants as parts
from symattn.input.errors import SpecError, SymattnError, clip

TOPIC = "symattn-sweep"  # the worker's event when a case starts: the client's clock for --case-seconds
SHAPE = ("batch", "heads", "kv_heads", "seqlen_q", "seqlen_k", "head_dim_qk", "head_dim_v")
# the kinds that take dO: the inputs' gradients, and a part keyword's own (its .grad)
GRADIENTS = ("dq", "dk", "dv", *parts.keyword_gradients())


class KernelFailure(Exception):
    """The kernel could not be imported, raised, or returned what is no attention output."""


def run_case(settings: dict[str, Any], index: int, point: dict[str, Any], kernel: str, key: str) -> dict[str, Any]:
    """The row of one case (``settings``: the grid's seed, rule and tolerances, kinds, causal_align, device)."""
    from symattn.kernel.cores import one_process

    worker = _announce(key)
    start = time.perf_counter()
    try:
        with one_process():  # the cluster is the parallelism: a worker per core, a case each
            checks, error = _checks(settings, point, kernel), None
    except KernelFailure as exc:
        checks, error = [], str(exc)
    return row(index, point, checks, error, time.perf_counter() - start, worker)


def row(
    index: int, point: dict[str, Any], checks: list[dict[str, Any]], error: str | None, seconds: float, worker: str
) -> dict[str, Any]:
    """A case's row: fails with ``error`` (the case as a whole) or with any failing check."""
    failing = [c for c in checks if c["verdict"] != "pass"]
    deciding = failing[0] if failing else checks[0] if checks else None
    return {
        "case": index,
        **point,
        "verdict": "fail" if error is not None or failing or not checks else "pass",
        "kind": None if deciding is None else deciding["kind"],
        "figure": None if deciding is None else deciding["figure"],
        "place": None if deciding is None else deciding["place"],
        "message": error if error is not None else None if deciding is None else deciding["message"],
        "checks": checks,
        "seconds": round(seconds, 3),
        "worker": worker,
    }


def _announce(key: str) -> str:
    """Tell the client this case has started (its --case-seconds clock), and name the worker."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):  # not on a Dask worker: one process runs the cases
        return "local"
    worker.log_event(TOPIC, {"key": key, "worker": worker.address})
    return worker.address


@lru_cache(maxsize=8)
def kernel_function(name: str) -> Any:
    """``MODULE:FUNCTION`` imported here, on the worker (once per worker)."""
    module, _, attribute = name.partition(":")
    try:
        found: Any = importlib.import_module(module)
    except Exception as exc:  # the user's module: whatever stops its import is this case's failure
        raise KernelFailure(f"the kernel's module {module!r} does not import here: {_raised(exc)}") from None
    for part in attribute.split("."):
        found = getattr(found, part, None)
    if not callable(found):
        raise KernelFailure(f"{module} has no function {attribute!r}")
    return found


def case_inputs(seed: int, point: dict[str, Any]) -> dict[str, Any]:
    """Q, K, V, dO and the numbers a part draws (one per head) as float32 arrays, from the seed and the case's
    shape alone: the float32 and bfloat16 cases of one shape, causal or not, see the same numbers (each rounded
    to its dtype)."""
    import numpy as np

    shape = [point[k] for k in SHAPE]
    words = hashlib.sha256(json.dumps(shape).encode()).digest()
    entropy = [seed & 0xFFFFFFFF, seed >> 32, *np.frombuffer(words, dtype=np.uint32).tolist()]
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))
    b, h, kv, n, m, d, dv = shape
    sizes: dict[str, tuple[int, ...]] = {"q": (b, h, n, d), "k": (b, kv, m, d), "v": (b, kv, m, dv)}
    sizes["dout"] = (b, h, n, dv)
    sizes |= {part.grid_key: (h,) for part in parts.SWEPT if part.drawn}
    return {name: rng.standard_normal(size, dtype=np.float32) for name, size in sizes.items()}


def variants(point: dict[str, Any], drawn: dict[str, Any]) -> dict[str, Any]:
    """The variant keywords of a point that are on (false, or a 0 that means none, is off), as each
    part makes them (``drawn``: the case's inputs, where a part's drawn numbers are, by its grid key)."""
    made: dict[str, Any] = {}
    for part in parts.SWEPT:
        value = part.sweep_argument(point.get(part.grid_key), point["heads"], drawn.get(part.grid_key))
        if value is not None:
            made[part.keyword] = value
    return made


def _checks(settings: dict[str, Any], point: dict[str, Any], kernel: str) -> list[dict[str, Any]]:
    import torch

    function = kernel_function(kernel)
    dtype, device = getattr(torch, point["dtype"]), settings["device"]
    made = case_inputs(settings["seed"], point)
    grads = any(kind in GRADIENTS for kind in settings["kinds"])
    q, k, v = (torch.from_numpy(made[n]).to(device=device, dtype=dtype).requires_grad_(grads) for n in "qkv")
    dout = torch.from_numpy(made["dout"]).to(device=device, dtype=dtype)
    extra = {name: t.to(device) if hasattr(t, "to") else t for name, t in variants(point, made).items()}
    own = {kind: p.keyword for kind, p in parts.keyword_gradients().items()}
    for kind, keyword in own.items():
        if kind in settings["kinds"]:  # every case has the keyword (grid.py): its gradient is its .grad
            extra[keyword].requires_grad_(True)
    masks = {"causal": point["causal"], "causal_align": settings["causal_align"]}
    given = {"q": q, "k": k, "v": v, "dout": dout, **{n: t for n, t in extra.items() if isinstance(t, torch.Tensor)}}
    kept = {name: t.detach().clone() for name, t in given.items()}
    out, lse = _call(function, (q, k, v), point, extra, dout if grads else None)
    # judged against the inputs it was given: one it changed in place would judge it on what it made of them
    changed = [name for name, t in given.items() if not torch.equal(t.detach(), kept[name])]
    if changed:
        raise KernelFailure(f"the kernel changed its input {', '.join(changed)} in place")
    results = {"output": out, "lse": lse, "dq": q.grad, "dk": k.grad, "dv": v.grad}
    results |= {kind: extra[keyword].grad if keyword in extra else None for kind, keyword in own.items()}
    references: dict[str, Any] = {}
    if settings["rule"] == "flash":
        references = _reference(q, k, v, dout if grads else None, masks, extra, lse)
    checks = []
    for kind in settings["kinds"]:
        options = {"kind": kind, **masks, "rule": settings["rule"]}
        options |= {part.keyword: extra.get(part.keyword) for part in parts.SWEPT}
        options |= {name: settings[name] for name in ("rtol", "atol", "max_ulp")}
        if kind in GRADIENTS:
            options["dout"] = dout
        if kind in references:
            options["reference"] = references[kind]
        checks.append(_check(kind, results[kind], (q, k, v), options))
    return checks


def _call(function: Any, qkv: tuple[Any, ...], point: dict[str, Any], extra: dict[str, Any], dout: Any) -> Any:
    """The kernel's (out, lse or None), and its backward for ``dout``."""
    scale = 1 / math.sqrt(point["head_dim_qk"])
    try:
        made = function(*qkv, causal=point["causal"], scale=scale, **extra)
    except (Exception, SystemExit) as exc:  # the user's kernel: whatever it raises (exit() too) fails this case
        raise KernelFailure(f"the kernel raised {_raised(exc)}") from None
    out, lse = made if isinstance(made, tuple) and len(made) == 2 else (made, None)
    if not hasattr(out, "backward"):
        raise KernelFailure(f"the kernel returned {type(made).__name__}, not a torch tensor or (out, lse)")
    if dout is not None:
        try:
            out.backward(dout.to(device=out.device, dtype=out.dtype))
        except (Exception, SystemExit) as exc:
            raise KernelFailure(f"the kernel's output has no backward: {_raised(exc)}") from None
    return out, lse


def _reference(q: Any, k: Any, v: Any, dout: Any, masks: dict[str, Any], extra: dict[str, Any], lse: Any) -> Any:
    """FlashAttention's naive results in the case's dtype: its output, LSE (in the kernel's LSE dtype) and
    gradients, for the same dO."""
    from symattn.sweep.reference import naive

    leaves = [t.detach().clone().requires_grad_(dout is not None) for t in (q, k, v)]
    # a keyword whose gradient is checked, as a leaf of its own: the kernel's .grad is left as the kernel made it
    own = {
        name: t.detach().clone().requires_grad_(True) for name, t in extra.items() if getattr(t, "requires_grad", False)
    }
    keywords = {**extra, **own}
    out, log_sum = naive(*leaves, causal=masks["causal"], causal_align=masks["causal_align"], keywords=keywords)
    made = {"output": out.detach(), "lse": log_sum.detach() if lse is None else log_sum.detach().to(lse.dtype)}
    if dout is not None:
        out.backward(dout)
        made |= {"dq": leaves[0].grad, "dk": leaves[1].grad, "dv": leaves[2].grad}
        made |= {kind: own[p.keyword].grad for kind, p in parts.keyword_gradients().items() if p.keyword in own}
    return made


def _check(kind: str, result: Any, qkv: tuple[Any, ...], options: dict[str, Any]) -> dict[str, Any]:
    """One kind judged by the engine: its verdict, rule, figure and worst place, or the engine's refusal."""
    from symattn.kernel.comparison import number_text
    from symattn.kernel.oracle import compare
    from symattn.testing import failure, with_tolerances

    check: dict[str, Any] = {"kind": kind, "verdict": "fail", "rule": None, "figure": None, "place": None}
    if result is None:
        missing = "no LSE: return (out, lse) to check it" if kind == "lse" else f"no {kind}: its input has no grad"
        return check | {"largest_ulp": None, "message": f"the kernel returned {missing}"}
    try:
        report = compare(result, *qkv, **with_tolerances(result, options))
    except SymattnError as exc:  # a refusal of the engine: this case's, in its one line
        # compare names its first argument out; here that is the kernel's LSE or a gradient, named by its kind
        named = exc.named(kind) if isinstance(exc, SpecError) and exc.source == "out" and kind != "output" else None
        return check | {"largest_ulp": None, "message": named or str(exc)}
    worst = report.comparison.worst
    return check | {
        "verdict": "pass" if report.ok else "fail",
        "rule": report.rule_text(),
        "figure": report.figure(),
        "place": report.worst_place,
        "largest_ulp": None if worst is None or worst.ulps is None else number_text(worst.ulps),
        "message": None if report.ok else failure(report),
    }


def _raised(exc: BaseException) -> str:
    first = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {clip(first, 200)}" if first else type(exc).__name__


__all__ = ["TOPIC", "KernelFailure", "case_inputs", "kernel_function", "row", "run_case", "variants"]
