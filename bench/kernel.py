"""compare's float64 path at kernel sizes, as ratios against a plain numpy float64 attention of the same
shape, measured in one run (issue 22).

    python bench/kernel.py              # 1024×1024×64, and one head of 4096×4096×128 (O, O's every entry, the LSE)
    python bench/kernel.py --quick      # 1024×1024×64 only
    python bench/kernel.py --grid       # also FlashAttention's grid, 9 × 6 heads × 1024×1024×64 (minutes)
    python bench/kernel.py --certificates   # compute --certify --float64 and both verifiers (minutes)
    python bench/kernel.py --batch      # a (2, 8, 1024, 128) batch via symattn.kernel.compare: text, then every entry
    python bench/kernel.py --every      # one head of 4096×4096×128 with every entry decided (JSON, --all) only

Each run also measures dQ, dK and dV for a given dO at 1024×1024×64 (the float64 backward path, then arb for
the entries its bound leaves open), against numpy's float64 backward pass of the same formulas.

Each target runs in a fresh process (its peak RSS is its own). The kernel measured is the same formula
computed in float32 (a naive float32 kernel, errors of a few ULPs); symattn's compare (the float64 path
with bounds, then two floats and arb for the entries the bound leaves open) measures it entry by entry. Printed:
the seconds of each, their ratio, peak RSS, and the fraction of entries refined past the float64 bounds; for
the forward targets also the CPU seconds of each (numpy's the best of three, its BLAS threads included;
symattn's with its forked workers'), which hold better than wall seconds on a machine other work keeps busy.
The numpy reference is timed on the arrays, warm (a first call pays BLAS's start-up: 0.85 s where a warm
one takes 0.14 s at 4096×4096×128), twice just before each of compare's three calls, and its best is the
reference (this VM's speed drifts by 10 to 15% from minute to minute: figures taken minutes apart gave a
ratio that drifted with it); compare likewise, the best of three, its first call printed beside (a fresh
process faults its arrays' pages in: here, a VM, the first touch of memory cost up to 0.5 s more at
(2, 8, 1024, 128)). compare is timed from a FloatResult (what the .npy reader
gives) to the text report's figures (every bucket, the maxima, the ten worst entries: what
``compare_head(..., worst=10)`` decides), and for O at 4096 also with every entry's figures decided (what
--all and JSON print), spec reading left out; the last lines are the whole `symattn compare`
process, from a spec naming .npy files and from a TOML spec of exact decimals.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def reference(Q, K, V):
    """Plain numpy float64 attention with the row-max shift: what a kernel test suite uses as its oracle."""
    import numpy as np

    Z = (Q @ K.T) / Q.dtype.type(np.sqrt(Q.shape[1]))  # in the inputs' dtype
    E = np.exp(Z - Z.max(axis=1, keepdims=True))
    return (E @ V) / E.sum(axis=1, keepdims=True)


def reference_lse(Q, K):
    """Each query's natural log-sum-exp of its scaled scores, as a kernel returns it beside O."""
    import numpy as np

    Z = (Q @ K.T) / Q.dtype.type(np.sqrt(Q.shape[1]))
    M = Z.max(axis=1)
    return M + np.log(np.exp(Z - M[:, None]).sum(axis=1))


def one(n: int, d: int, heads: int, quantity: str = "output", seed: int = 0, every: bool = False) -> dict:
    """Time the reference and compare on `heads` heads of n×n×d float32 inputs, in this process: the output
    O, or the LSE (``lse``: one row per head), each against the numpy reference of O. compare decides what
    its text report shows (every bucket, the maxima, the ten largest errors), or with ``every`` every
    entry's figures (--all, JSON)."""
    import numpy as np

    from symattn.input.floats import FloatResult
    from symattn.kernel import float64
    from symattn.kernel import heads as kernel
    from symattn.kernel.spec_comparison import WORST

    rng = np.random.default_rng(seed)
    made = []
    for _ in range(heads):
        Q, K, V = (rng.standard_normal((n, d)).astype(np.float32).astype(np.float64) for _ in range(3))
        made.append(float64.Head(Q, K, V, 1 / np.sqrt(d), 3 * float64.U, None, None))
    outputs = [reference(h.Q, h.K, h.V) for h in made]
    best_of(3, lambda: [reference(h.Q, h.K, h.V) for h in made])  # warm: BLAS's start-up paid here
    # the kernel measured: the same formula computed in float32 (FlashAttention's "naive" of the dtype)
    if quantity == "lse":
        x = np.stack([reference_lse(h.Q.astype(np.float32), h.K.astype(np.float32)) for h in made])
    else:
        x = np.concatenate([reference(*(M.astype(np.float32) for M in (h.Q, h.K, h.V))) for h in made], axis=1)
    assert x.dtype == np.float32 and outputs
    result = FloatResult.of_array("bench", "float32", x.astype(np.float64))  # what the .npy reader gives
    worst = None if every else WORST
    beside: list[tuple[float, ...]] = []  # numpy's wall and CPU seconds, run just before each call of compare

    def numpy_again() -> None:
        beside.append(tuple(best_of(2, lambda: [reference(h.Q, h.K, h.V) for h in made], clock) for clock in CLOCKS))

    c, first_s, symattn_s, symattn_cpu = timed(lambda: kernel.compare_head(made, result, quantity, worst), numpy_again)
    numpy_s, numpy_cpu = (min(x[k] for x in beside) for k in range(2))  # the same spells of the machine as compare's
    cpus = {"numpy_cpu": numpy_cpu, "symattn_cpu": symattn_cpu, "first_s": first_s}
    return {"shape": f"{heads}×{n}×{n}×{d}", "quantity": quantity, **measured(c, numpy_s, symattn_s), **cpus}


def timed(run, between=None, times: int = 3):
    """(run()'s result, the first call's wall seconds, the least of ``times`` calls' wall seconds and CPU
    seconds, forked workers' included): the best of three as numpy's, and the first apart (a fresh process
    faults in its arrays' pages: on this project's VM the first touch of memory costs the most). ``between``:
    run before each call, untimed here (numpy's reference again: the VM's speed drifts by 10 to 15% from one
    minute to the next, and a ratio of figures taken minutes apart drifted with it)."""
    global _FIRST_PEAK
    walls, cpus, made = [], [], None
    for _ in range(times):
        made = None  # the last call's result let go first
        if between is not None:
            between()
        start, cpu = time.perf_counter(), cpu_seconds()
        made = run()
        walls.append(time.perf_counter() - start)
        cpus.append(cpu_seconds() - cpu)
        # the peak RSS of the first call: the later ones add what the allocator kept of the earlier ones
        _FIRST_PEAK = _FIRST_PEAK or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return made, walls[0], min(walls), min(cpus)


_FIRST_PEAK = 0  # KiB (Linux), after timed's first call
CLOCKS = (time.perf_counter, time.process_time)  # wall seconds, CPU seconds (BLAS's threads included)


def cpu_seconds() -> float:
    """CPU seconds of this process and of the worker processes it forked and reaped (symattn.kernel.cores)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def batch(every: bool, seed: int = 0) -> dict:
    """Time numpy's float64 attention of a (2, 8, 1024, 128) batch and ``symattn.kernel.compare`` of the naive
    float32 kernel's O, to its text report (``worst=10``: each (batch, head)'s summary, the ten largest
    errors), or with ``every`` what it did before, every entry decided first (``worst=None``), in this process."""
    from dataclasses import replace

    import numpy as np

    from symattn.kernel import compare

    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((2, 8, 1024, 128)).astype(np.float32) for _ in range(3))
    wide = [
        (q[b, h].astype(np.float64), k[b, h].astype(np.float64), v[b, h].astype(np.float64))
        for b in range(2)
        for h in range(8)
    ]
    best_of(3, lambda: [reference(*x) for x in wide])  # warm: BLAS's start-up paid here
    out = np.stack([reference(q[b, h], k[b, h], v[b, h]) for b in range(2) for h in range(8)]).reshape(q.shape)
    beside: list[float] = []  # numpy's seconds, run just before each call of compare

    def run():
        report = compare(out, q, k, v, worst=None if every else 10)
        assert replace(report, listed=10).text()  # the text report, the ten largest errors listed, as before
        return report

    report, first_s, symattn_s, _ = timed(run, lambda: beside.append(best_of(2, lambda: [reference(*x) for x in wide])))
    numpy_s = min(beside)
    made = measured(report.comparison, numpy_s, symattn_s)
    label = "output" + (" (every entry)" if every else "")
    return {"shape": "(2, 8, 1024, 128)", "quantity": label, **made, "first_s": first_s}


def measured(c, numpy_s: float, symattn_s: float) -> dict:
    """The figures every target prints: the seconds, their ratio, the peak RSS, what arb refined, the worst."""
    return {
        "numpy_s": numpy_s,
        "symattn_s": symattn_s,
        "ratio": symattn_s / numpy_s,
        "peak_gib": (_FIRST_PEAK or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) / 2**20,  # KiB: GiB
        "refined": c.refined,
        "entries": len(c.entries),
        "max_ulps": str(c.worst.ulps) if c.worst else None,
    }


def backward(Q, K, V, dO):
    """Plain numpy float64 backward pass of attention, no autograd: dQ, dK, dV for the given dO."""
    import numpy as np

    c = Q.dtype.type(1 / np.sqrt(Q.shape[1]))  # in the inputs' dtype
    Z = (Q @ K.T) * c
    E = np.exp(Z - Z.max(axis=1, keepdims=True))
    A = E / E.sum(axis=1, keepdims=True)
    dS = A * (dO @ V.T - np.sum(dO * (A @ V), axis=1, keepdims=True))
    return {"dQ": c * (dS @ K), "dK": c * (dS.T @ Q), "dV": A.T @ dO}


def best_of(times: int, run, clock=time.perf_counter) -> float:
    """The least of ``times`` wall-clock seconds (or ``clock``'s) of run(): the machine's other work only adds."""
    best = float("inf")
    for _ in range(times):
        start = clock()
        run()
        best = min(best, clock() - start)
    return best


def gradient(n: int, d: int, quantity: str, seed: int = 0) -> dict:
    """Time numpy's float64 backward pass and compare's dQ, dK or dV on n×n×d float32 inputs, in this process;
    the gradient measured is the naive float32 kernel's (the same formulas in float32)."""
    import numpy as np

    from symattn.input.floats import FloatResult
    from symattn.kernel import float64, float64_backward
    from symattn.kernel import heads as kernel
    from symattn.kernel.spec_comparison import WORST

    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal((n, d)).astype(np.float32) for _ in range(4)]
    wide = [M.astype(np.float64) for M in inputs]
    numpy_s = best_of(3, lambda: backward(*wide))  # warm: the first call pays BLAS's start-up
    x = backward(*inputs)[quantity]
    assert x.dtype == np.float32
    result = FloatResult.of_array("bench", "float32", x.astype(np.float64))  # what the .npy reader gives
    root = math.isqrt(d)  # d = 4^k: 1/√d is a float, exactly, as compare's float64 path takes it
    exact = Fraction(1, root) if root * root == d and root & (root - 1) == 0 else None
    scale_error = 0.0 if exact is not None else 3 * float64.U
    head = float64_backward.GradientHead(*wide[:3], 1 / np.sqrt(d), scale_error, exact, None, wide[3])
    start = time.perf_counter()
    c = kernel.compare_head([head], result, quantity, WORST)  # what the text report shows
    symattn_s = time.perf_counter() - start
    bound_s = best_of(3, lambda: float64_backward.gradient(head, quantity))
    return {"shape": f"{quantity} {n}×{n}×{d}", "bound_s": bound_s, **measured(c, numpy_s, symattn_s)}


def whole_process(n: int, d: int, files: bool = False, quantity: str = "output") -> str:
    """`symattn compare` as a user runs it, n×n×d: spec and .npy result written first. The spec holds Q, K, V
    as exact decimals (TOML), or with ``files`` names q.npy, k.npy, v.npy (float32) beside it; the result
    is the naive float32 kernel's (the same formula in float32): O, or with ``quantity`` dQ, dK or dV for
    a dO of do.npy."""
    import tempfile
    from decimal import Decimal

    import numpy as np

    rng = np.random.default_rng(1)
    Q, K, V = (rng.standard_normal((n, d)).astype(np.float32) for _ in range(3))
    with tempfile.TemporaryDirectory() as tmp:
        if files:
            for name, M in zip("qkv", (Q, K, V)):
                np.save(Path(tmp, f"{name}.npy"), M)
            Path(tmp, "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n')
        else:
            rows = lambda M: "[" + ",".join("[" + ",".join(str(Decimal(float(x))) for x in r) + "]" for r in M) + "]"  # noqa: E731
            Path(tmp, "s.toml").write_text(f"Q = {rows(Q)}\nK = {rows(K)}\nV = {rows(V)}\n")
        command = ["compare", "s.toml", "o.npy"]
        if quantity == "output":
            np.save(Path(tmp, "o.npy"), reference(Q, K, V))
        else:
            dO = rng.standard_normal((n, d)).astype(np.float32)
            np.save(Path(tmp, "do.npy"), dO)
            np.save(Path(tmp, "o.npy"), backward(Q, K, V, dO)[quantity])
            command += ["--quantity", quantity.lower(), "--grad-output", "do.npy"]
        start = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-m", "symattn", *command],
            cwd=tmp,
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )
        seconds = time.perf_counter() - start
        if run.returncode == 2:  # refused, with one line
            return f"refused: {run.stderr.strip()}"
        return f"{seconds:.2f} s"


def peak_process(command: list[str], cwd: str) -> tuple[float, float, int, str, float]:
    """(seconds, peak RSS in GiB, exit status, its first line, CPU seconds) of a whole `symattn` process, its
    own figures (bench/launched.py), its CPU time with that of the processes it forked and reaped."""
    from bench.launched import launched

    seconds, cpu, peak, code, out = launched(command, cwd)
    return seconds, peak, code, out.split("\n")[0][:160], cpu


def best_cpu(times: int, run) -> float:
    """The least CPU seconds of ``times`` runs of run() with BLAS on one thread: a ratio of CPU times holds on a
    machine that other work keeps busy, where wall-clock ratios swung tenfold."""
    from threadpoolctl import threadpool_limits

    best = float("inf")
    with threadpool_limits(limits=1):
        for _ in range(times):
            start = time.process_time()
            run()
            best = min(best, time.process_time() - start)
    return best


def certificates(n: int, d: int, digits: int, gradients: bool, standalone: bool) -> None:
    """compute --certify --float64 (version 3: O and both LSEs, with dQ, dK and dV for a dO when
    ``gradients``), verify-certificate and, with ``standalone``, python -m symattn.verifier, each a whole
    process from .npy files, against numpy's float64 attention of the same shape (the best of three warm runs;
    with its backward pass where the certificate holds the gradients)."""
    import tempfile

    import numpy as np

    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((n, d)).astype(np.float32) for _ in range(4)]
    wide = [a.astype(np.float64) for a in arrays]
    numpy_s = best_of(3, lambda: reference(*wide[:3]))
    numpy_cpu = best_cpu(3, lambda: reference(*wide[:3]))
    if gradients:
        numpy_s = best_of(3, lambda: (reference(*wide[:3]), backward(*wide)))
        numpy_cpu = best_cpu(3, lambda: (reference(*wide[:3]), backward(*wide)))
    run = [sys.executable, "-m", "symattn"]
    with tempfile.TemporaryDirectory() as tmp:
        for name, a in zip(("q", "k", "v", "do"), arrays):
            np.save(Path(tmp, f"{name}.npy"), a)
        Path(tmp, "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n')
        flags = ["--grad-output", "do.npy"] if gradients else []
        what = "O, LSE" + (", dQ, dK, dV" if gradients else "")
        made = peak_process(
            [*run, "compute", "s.toml", "--certify", "--float64", "--digits", str(digits), *flags, "-o", "c.json"]
            + ["--max-seconds", "3600"],
            tmp,
        )
        size = Path(tmp, "c.json").stat().st_size if made[2] == 0 else 0
        steps = [("compute --certify --float64", made)]
        steps.append(
            ("verify-certificate", peak_process([*run, "verify-certificate", "c.json", "--max-seconds", "3600"], tmp))
        )
        if standalone:
            steps.append(
                ("python -m symattn.verifier", peak_process([sys.executable, "-m", "symattn.verifier", "c.json"], tmp))
            )
        for label, (seconds, peak, code, first, cpu) in steps:
            print(
                f"{n}×{n}×{d} {what}, {digits} digits: {label} {seconds:.1f} s ({seconds / numpy_s:.0f}× numpy's "
                f"{numpy_s * 1e3:.1f} ms), CPU {cpu:.1f} s ({cpu / numpy_cpu:.0f}× numpy's {numpy_cpu * 1e3:.1f} ms "
                f"on one thread), peak {peak:.2f} GiB, exit {code}, certificate {size / 1e6:.1f} MB"
                + ("" if code == 0 else f": {first}")
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--grid", action="store_true", help="also 9 batches × 6 heads × 1024×1024×64")
    parser.add_argument("--certificates", action="store_true", help="certificates and their verifiers only")
    parser.add_argument("--one", nargs=5, metavar=("N", "D", "HEADS", "QUANTITY", "EVERY"), help=argparse.SUPPRESS)
    parser.add_argument("--gradient", nargs=3, metavar=("N", "D", "QUANTITY"), help=argparse.SUPPRESS)
    parser.add_argument("--batch", action="store_true", help="a (2, 8, 1024, 128) batch through the API only")
    parser.add_argument("--every", action="store_true", help="one head of 4096×4096×128, every entry decided, only")
    parser.add_argument("--one-batch", choices=("shown", "every"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_batch:
        print(json.dumps(batch(args.one_batch == "every")))
        return
    if args.batch:  # the text report, then what it cost before (every entry decided), each in a process of its own
        for every in ("shown", "every"):
            run = subprocess.run(
                [sys.executable, __file__, "--one-batch", every], capture_output=True, text=True, check=True
            )
            r = json.loads(run.stdout)
            print(
                f"{r['shape']} {r['quantity']} via symattn.kernel.compare: numpy {r['numpy_s']:.3f} s, symattn "
                f"{r['symattn_s']:.3f} s ({r['ratio']:.1f}x; its first call {r['first_s']:.3f} s, "
                f"{r['first_s'] / r['numpy_s']:.1f}x), peak {r['peak_gib']:.2f} GiB, refined {r['refined']}"
            )
        return
    if args.one:
        n, d, heads, quantity, every = args.one
        print(json.dumps(one(int(n), int(d), int(heads), quantity, every=every == "every")))
        return
    if args.gradient:
        print(json.dumps(gradient(int(args.gradient[0]), int(args.gradient[1]), args.gradient[2])))
        return
    if args.certificates:
        for n, d, digits, gradients, standalone in (
            (256, 64, 10, True, True),
            (1024, 128, 10, False, False),
            (4096, 128, 10, False, False),
            (4096, 128, 8, False, False),
        ):
            certificates(n, d, digits, gradients, standalone)
        return
    targets = [(4096, 128, 1, "output", "every")] if args.every else [(1024, 64, 1, "output", "shown")]
    if not args.quick and not args.every:  # the text report, then every entry decided (--all, JSON) for the same O
        targets += [(4096, 128, 1, "output", "shown"), (4096, 128, 1, "output", "every")]
        targets += [(4096, 128, 1, "lse", "shown")]
    targets += [] if args.every else [(1024, 128, 16, "output", "shown")]  # a (2, 8, 1024, 128) batch's work
    targets += [(1024, 64, 54, "output", "shown")] if args.grid else []
    for n, d, heads, quantity, every in targets:
        run = subprocess.run(
            [sys.executable, __file__, "--one", str(n), str(d), str(heads), quantity, every],
            capture_output=True,
            text=True,
            check=True,
        )
        r = json.loads(run.stdout)
        label = " (every entry)" if every == "every" else ""
        print(
            f"{r['shape']} {r['quantity']}{label}: numpy {r['numpy_s']:.3f} s, symattn compare {r['symattn_s']:.3f} s "
            f"({r['ratio']:.1f}x; its first call {r['first_s']:.3f} s, {r['first_s'] / r['numpy_s']:.1f}x), "
            f"peak {r['peak_gib']:.2f} GiB, refined (two floats, then arb) {r['refined']} of "
            f"{r['entries']} ({100 * r['refined'] / r['entries']:.3f}%), max {r['max_ulps']} ULP; CPU: numpy "
            f"{r['numpy_cpu']:.3f} s, symattn {r['symattn_cpu']:.3f} s ({r['symattn_cpu'] / r['numpy_cpu']:.1f}x)"
        )
    if args.every:
        return
    for quantity in ("dQ", "dK", "dV"):
        run = subprocess.run(
            [sys.executable, __file__, "--gradient", "1024", "64", quantity], capture_output=True, text=True, check=True
        )
        r = json.loads(run.stdout)
        print(
            f"{r['shape']}: numpy backward {r['numpy_s']:.3f} s, symattn compare {r['symattn_s']:.3f} s "
            f"({r['ratio']:.1f}x; the bound alone {r['bound_s']:.3f} s, {r['bound_s'] / r['numpy_s']:.1f}x), "
            f"peak {r['peak_gib']:.2f} GiB, refined by arb {r['refined']} of {r['entries']} "
            f"({100 * r['refined'] / r['entries']:.3f}%), max {r['max_ulps']} ULP"
        )
    print(f"symattn compare, whole process, 1024×1024×64 from .npy files: {whole_process(1024, 64, files=True)}")
    for quantity in ("dQ", "dK", "dV"):
        took = whole_process(1024, 64, files=True, quantity=quantity)
        print(f"symattn compare --quantity {quantity.lower()}, whole process, 1024×1024×64 from .npy files: {took}")
    for n in (1024, 512):  # a TOML spec of 1024×64 float32 values in exact decimals passes 4 MiB
        print(f"symattn compare, whole process, {n}×{n}×64 from a TOML spec: {whole_process(n, 64)}")


if __name__ == "__main__":
    main()
