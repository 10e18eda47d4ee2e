"""Every limit on input size and on expensive work, in one place.

Tiny input must never take gigabytes or minutes, so each size and each costly
step is bounded here, and every limit that is hit says which one it was. The
README's "Limits" table lists the same names and numbers.
"""

from __future__ import annotations

import math
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from symattn.input.errors import LimitError

# --- reading input ----------------------------------------------------------
FILE_BYTES = 4 * 1024 * 1024  # a spec or claims file; checked before it is read
CERTIFICATE_BYTES = 1024 * 1024 * 1024  # a certificate that verify-certificate reads (256 × 64 is ~47 MB)
# JSON numbers in a certificate: its shapes and counts (its values, floats and inputs are strings; 4096 × 128 holds
# 34); each number read is an object, so 1 GB of "0," would take 80 GB before any check of its structure
CERTIFICATE_NUMBERS = 1 << 20
FLOAT_CERTIFICATE_TOKENS = 1 << 14  # queries or keys of a float64-path certificate (compute --certify --float64)
# multiply-adds of a float64-path certificate's scores (n·m·d), which verify-certificate recomputes in float64
# (4096 × 4096 × 128 is 2^31)
FLOAT_CERTIFICATE_WORK = 1 << 34
HASHED_BYTES = 16 * 1024 * 1024 * 1024  # a spec or input file a certificate hashes (streamed, never held)
RESULT_BYTES = 64 * 1024 * 1024  # a float result (.npy or JSON) that `compare` reads
NESTING = 32  # lists and tables inside one another in TOML or JSON

# --- sizes ------------------------------------------------------------------
TOKENS = 1024  # rows of Q, K, V or X, for compute and check
# rows of Q, K, V given as .npy or .safetensors files: compare's float64 path streams them by row blocks
# (FlashAttention's tests reach 4224); the exact path still takes TOKENS
KERNEL_TOKENS = 8192
DIMS = 1024  # columns of any input matrix, and a head's d in files with head axes
DOCUMENT_TOKENS = 128  # rows (queries or keys) a rendered document may show
DOCUMENT_DIMS = 512  # columns a rendered document may show
HEADS = 16
LABEL = 40  # characters of a token label
TITLE = 200  # characters of a title
CLAIMS = 100_000  # claimed numbers in one claims file
STUDENTS = 1000  # students of one exercise (count or roster)
STUDENT_NAME = 100  # characters of a student's name in a roster (it heads the sheet)
RETURNS = 5000  # answers files one grade run reads (several returns per student are allowed)
LMS_ROWS = 5000  # rows (attempts) of an LMS's responses report that grade --lms-csv reads
LMS_SLOTS = 100  # question slots (Response N columns) of one responses report

# --- numbers ----------------------------------------------------------------
NUMBER_LENGTH = 64  # characters of one literal number
NUMBER_EXPONENT = 50  # |e| in 1.5e-3
CLAIM_EXPONENT = 5000  # |e| in a claimed 1.444e-2850 (values reach 10^±4343)
DECIMALS = 50  # digits after the point for any quantity
DIGITS = 1000  # significant digits of compute
ABS_Z = 10_000  # |S · scale| before the softmax; e^10000 has 4343 digits
FIXED_DIGITS = 40  # digits before the point of a number shown in fixed notation
WORK_BITS = 1 << 28  # bits of all the exps of one model together (queries · keys · bits of e^|z|)
PRECISION_BITS = 1 << 14  # working precision for deciding one rounding, beyond a value's magnitude
# characters of one number in a certificate: a bound has up to PRECISION_BITS + 3·ABS_Z + 64 digits
# after the point (its binary point) and 4344 before it (e^ABS_Z); checked before the text is converted
BOUND_LENGTH = 64_000

# --- formulas with symbols ---------------------------------------------------
FORMULA_LENGTH = 200  # characters of one formula
FORMULA_DEPTH = 40  # parentheses inside one another
FORMULA_POWER = 16  # |n| in x^n
FORMULA_BITS = 4096  # bits of an exact number that a formula makes (16^16^16 is refused)
FORMULA_TERMS = 1000  # terms of an entry, or of a score, once multiplied out
SYMBOLIC_SIZE = 16  # rows and columns of a matrix that holds formulas

# --- the backward pass: deciding which gradients are exactly rational ---------------
# Past these an entry is shown with ≈ (its digits are still correct); they bound the work, not the answer.
EXPANDED_TERMS = 20_000  # terms of one expanded denominator before exactness is left undecided
PRODUCT_WORK = 200_000  # term products of one multiplication while deciding exactness
EXACTNESS_WORK = 3_000_000  # term products of the whole exactness run; past it, entries left are undecided
COMBINE_WORK = 20_000  # term products of bringing one entry's fractions over one denominator
# --backward is refused past this (no ≈ here): terms of the gradients' closed forms, Σ over heads of
# n·m·(m + d_k + d_v), plus X·W's with projections; checked before anything is built (64 tokens × 64
# dimensions is 786,432). Beyond it the n×m gradients alone pass 1 GB (1024 × 1 took 1.8 GB)
BACKWARD_TERMS = 1 << 20
# compute writes the gradients' SymPy closed forms up to this many of those terms (6 tokens × 4
# dimensions hold 504 and print in a second; 8 × 4 hold 1024 and take three, 32 × 16 would take
# minutes). Past it, each entry is written as its exact rational where it has one, else ≈ and its digits
BACKWARD_CLOSED_FORMS = 512
# the gradients' closed forms are made at all (a check's closed-form column of gradient claims) up to this
# many terms: 16 tokens × 8 dimensions hold 8192; 32 × 16 hold 65536, took 15 s and a megabyte of text
BACKWARD_FORMS = 8192

# --- symattn serve ---------------------------------------------------------------
BODY_BYTES = 256 * 1024  # one request body
REQUEST_SECONDS = 10.0  # one request's computation; symattn serve --max-seconds changes it
WORKERS = 2  # worker processes: the work of two requests at once
WAITING = 256  # requests queued for a worker before the server answers 503
GRACE_SECONDS = 2.0  # past the limit, a worker that has not stopped itself is killed
WARM_SECONDS = 60.0  # a new worker's start-up (imports, templates), which no request's time counts

# --- time -----------------------------------------------------------------------
SECONDS = 60  # wall clock for one command; --max-seconds raises it
MAX_SECONDS = 86_400  # the most --max-seconds takes


def expanded_terms(terms: int, power: int) -> int:
    """How many monomials (x_1 + … + x_terms)^power can have: C(terms + power − 1, power)."""
    return math.comb(terms + power - 1, power)


@contextmanager
def deadline(seconds: float | None, what: str) -> Iterator[None]:
    """Stop the work inside with a :class:`LimitError` once ``seconds`` have passed.

    Uses SIGALRM, so it acts only in the main thread of a Unix process (the
    CLI); elsewhere it is a no-op and the size limits still hold.
    """
    usable = (
        seconds is not None and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    )
    if seconds is None or not usable:  # (None is never usable; said again for the type checker)
        yield
        return

    def expire(signum: int, frame: object) -> None:
        global _rung
        _rung = LimitError(what, None, f"took longer than {seconds:g} s (the time limit; raise it with --max-seconds)")
        raise _rung

    hook = sys.unraisablehook

    def quiet(unraisable: Any) -> None:
        # raised where Python cannot pass it on (a finalizer): not a bug to report; the timer asks again
        if not isinstance(unraisable.exc_value, LimitError):
            hook(unraisable)

    global _rung
    outer, _rung = _rung, None
    previous = signal.signal(signal.SIGALRM, expire)
    sys.unraisablehook = quiet
    # repeating: an exception lost in a finalizer is raised again 50 ms later, where it stops the work
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.05)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        sys.unraisablehook = hook
        _rung = outer


_rung: LimitError | None = None  # the time limit of the innermost deadline, once its alarm has rung


def _timer_stopped() -> tuple[float, float] | None:
    """The command's timer, stopped: (seconds left, interval); None where there is none to stop."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        return None
    return signal.setitimer(signal.ITIMER_REAL, 0)


@contextmanager
def paused() -> Iterator[None]:
    """Work with its own time limit (TeX: LATEX_SECONDS) that --max-seconds does not count."""
    stopped = _timer_stopped()
    try:
        yield
    finally:
        if stopped and stopped[0]:
            signal.setitimer(signal.ITIMER_REAL, *stopped)


@contextmanager
def own_clocks() -> Iterator[float | None]:
    """Work that shares out the command's time among its parts, each under its own :func:`deadline`.

    Yields the seconds the command has left (None: no time limit runs); the command's timer stops
    meanwhile, and goes on afterwards with what the work did not use.
    """
    import time

    stopped = _timer_stopped()
    start = time.monotonic()
    try:
        yield stopped[0] if stopped and stopped[0] else None
    finally:
        if stopped and stopped[0]:
            left = stopped[0] - (time.monotonic() - start)
            signal.setitimer(signal.ITIMER_REAL, max(left, 0.001), stopped[1])


@contextmanager
def alarm_guard() -> Iterator[None]:
    """Work that fills a cache, which the time limit may interrupt anywhere: once the alarm has rung, the
    work ends in the time limit, and what it made is not kept.

    The alarm can land inside code that catches a ValueError, which a LimitError is: Fraction's own
    hash does, and then returns a wrong hash. The work goes on with a half-filled dict and fails with
    another error (a KeyError), or finishes with a wrong result. Either is the time limit.
    """
    try:
        yield
    except Exception:
        if _rung is None:
            raise
        # whatever surfaced, even a LimitError that a reader wrapped in its file and key, is the time limit
        raise _again(_rung) from None
    if _rung is not None:
        raise _again(_rung)


def _again(error: LimitError) -> LimitError:
    return LimitError(error.source, error.key, error.problem)


# --- exports ------------------------------------------------------------------
LATEX_SECONDS = 120  # wall clock of one latexmk run for --format pdf (on top of --max-seconds)

# --- float results (compare) ----------------------------------------------------
NPY_HEADER = 10_000  # bytes of a .npy header (NumPy's own max_header_size); checked before it is matched
# characters of one JSON number of a float result: the exact decimal of any float64 (up to 767
# significant digits, 1074 after the point) fits; checked before the text is converted
RESULT_NUMBER_LENGTH = 1100

# --- issue 22: spec keys that name a .npy or .safetensors file -----------------------
TENSOR_BYTES = 64 * 1024 * 1024  # one such file (1024 × 1024 float64 is 8 MiB); checked before it is read
TENSOR_ENTRIES = 1 << 23  # entries of one array of a .npy or .safetensors file (64 MiB as float64)
SAFETENSORS_HEADER = 1024 * 1024  # bytes of a .safetensors JSON header; checked before it is parsed
BATCH_HEADS = 64  # batches × heads of Q, K, V files with those axes (FlashAttention's grid: 9 × 6)
ARB_BALLS = 1 << 23  # arb balls compare keeps to serve a refined row again (about 48 bytes each at 96 bits)

# --- issue 31: symattn sweep ----------------------------------------------------------
SWEEP_CASES = 100_000  # cases of one grid (the product of its lists), checked before any runs

# --- issue 20 (modA): grouped-query heads --------------------------------------------
KV_HEADS = 16  # key/value heads (grouped-query): at most the query heads
# (each variant's own limits are in its module of symattn.variants)

# --- compare's gradients (--quantity dq, dk, dv) ---------------------------------------
GRADIENT_TOKENS = 64  # queries or keys of compare --quantity dq|dk|dv (the exact backward pass: 6.8 s at 64×64×64)
# ... on the float64 path (Q, K, V and dO of float32 values): memory O(block · keys + N · D)
KERNEL_GRADIENT_TOKENS = 8192
# scores (queries × keys) of arb's refinement of dK or dV entries the float64 bound leaves open: each needs
# every query's ℓ and D (4 s at 1024 × 1024, a minute or two at 4096 × 4096); past it compare refuses in one line
GRADIENT_REFINE_SCORES = 1 << 24
# terms of exact rational arithmetic in a proof that an entry compare cannot narrow away from 0 is exactly
# 0 (exact/zeros.py: scores, sums and pairs of groups of equal scores); past it the entry stays undecided
ZERO_TERMS = 1 << 22
