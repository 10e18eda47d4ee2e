"""Arb's balls at scores far past 2^96 (a scale of 2^200, FP8 descales near float32's largest): the value is
finite, so refinement goes on at more bits rather than calling it not finite (issue 30, a leftover)."""

from fractions import Fraction

import numpy as np

from symattn.kernel import float64, refine

Q = np.array([[1.0, 0.5], [0.25, -1.0]])
K = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
V = np.array([[1.0, 2.0], [3.0, -4.0], [0.5, 0.75]])


def test_outputs_of_scores_past_the_first_balls_precision_are_decided_at_more_bits():
    head = float64.head(Q, K, V, Fraction(2**200), None)
    assert head is not None

    def decide(i, j, lo, hi):
        return "decided" if lo <= hi and hi - lo < Fraction(1, 2**80) else None

    out, digits = refine.refine(head, "output", {0: [0, 1], 1: [1]}, decide, 15, two_floats=False)
    # each row's largest score is key 0's by 2^198 or more: its weight is 1 within e^-(2^197), O = V[0]
    assert {key: (outcome, str(shown)) for key, (outcome, shown) in out.items()} == {
        (0, 0): ("decided", "1.00000000000000"),
        (0, 1): ("decided", "2.00000000000000"),
        (1, 1): ("decided", "2.00000000000000"),
    }
    assert digits == 57  # 384 bits: the first balls finite enough


SATURATED = """
import numpy as np, ml_dtypes
from symattn.kernel import compare
rng = np.random.default_rng(7)
q, k, v = (rng.standard_normal((1, 2, 8, 16)).astype(ml_dtypes.float8_e4m3fn) for _ in range(3))
x = [a.astype(np.float64) for a in (q, k, v)]
top = np.einsum("bhqd,bhkd->bhqk", x[0], x[1]).argmax(-1)
o = np.take_along_axis(x[2], top[..., None].repeat(16, -1), axis=2).astype(np.float32)
big = np.full((1, 2), 2.0**60, dtype=np.float32)
report = compare(np.nextafter(o, np.float32(np.inf)), q, k, v, q_descale=big, k_descale=big)
print(report.text())
"""


def test_a_saturated_softmax_of_fp8_descales_is_compared_within_memory():
    """q_descale·k_descale = 2^120: each row's largest score wins by 2^116 and more, so each exact output is
    V at that key within e^-(2^116), and one float above it is 1 ULP off (2 of the smaller ULP below a power
    of 2). The errors' balls are near e^-(2^116): made rationals, they took 24 GB before the system killed
    the process; 2 GiB of address space is the cap here."""
    import resource
    import subprocess
    import sys

    def capped() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    said = subprocess.run(
        [sys.executable, "-c", SATURATED], capture_output=True, text=True, timeout=120, preexec_fn=capped
    )
    assert said.stderr == ""
    assert said.stdout.splitlines()[:7] == [
        "The output of out (float32) against the exact values",
        "Places are 0-based, as numpy indexes: out[batch, head, query, column].",
        "",
        "0 of 256 entries are correctly rounded (error at most 0.5 ULP).",
        "Largest error: 2.00 ULP, at out[0, 0, 0, 3] (one of 19 places).",
        "Largest relative error: 1.19e-7, at out[0, 0, 0, 3] (one of 23 places).",
        "Largest error relative to its row's largest magnitude: 1.19e-7, at out[0, 0, 0, 3] (one of 6 places).",
    ]
