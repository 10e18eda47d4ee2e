"""The pytest plugin (issue 30): `--symattn-summary` prints one table of every attention check a session
made, with and without pytest-xdist, and the documentation's example test file runs as it is."""

from __future__ import annotations

import tomllib
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from symattn.input.decimals import significant_exact
from symattn.kernel.comparison import number_text
from symattn.pytest_plugin import table

pytest_plugins = ("pytester",)
ROOT = Path(__file__).resolve().parent.parent

CHECKS = """
import numpy as np
from symattn.kernel import compare
from symattn.testing import assert_attention_close


def heads(seed):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((8, 4)).astype(np.float32) for _ in range(3))
    s = q.astype(np.float64) @ k.T.astype(np.float64) / 2
    w = np.exp(s - s.max(axis=1, keepdims=True))
    return q, k, v, ((w / w.sum(axis=1, keepdims=True)) @ v).astype(np.float32)


def test_holds():
    q, k, v, out = heads(0)
    assert_attention_close(out, q, k, v)


def test_a_planted():  # after test_holds in the file: the table keeps the file's order, not the names'
    q, k, v, out = heads(1)
    out[3, 2] += 1
    assert_attention_close(out, q, k, v)


def test_runs():
    q, k, v, out = heads(2)
    other = out.copy()
    other[5, 1] = np.nextafter(other[5, 1], np.float32(9))
    assert compare([out, other], q, k, v, max_ulp=1).spread.differ == 1
"""


def reference(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's output (float32) and a float64 reference of the same heads (not symattn's)."""
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((8, 4)).astype(np.float32) for _ in range(3))
    s = q.astype(np.float64) @ k.T.astype(np.float64) / 2
    w = np.exp(s - s.max(axis=1, keepdims=True))
    ref = (w / w.sum(axis=1, keepdims=True)) @ v
    return ref.astype(np.float32), ref


def three(x: float) -> str:
    return number_text(significant_exact(Fraction(x), 3))


def largest(values: np.ndarray) -> tuple[str, str]:
    at = np.unravel_index(int(np.argmax(values)), values.shape)
    return three(values.max()), f"out[{at[0]}, {at[1]}]"


def expected_rows() -> list[dict[str, str]]:
    """The table's rows, each figure from the float64 reference."""
    rows = []
    common = {"shape": "(8, 4)", "dtype": "float32"}
    for test, seed in (("test_holds", 0), ("test_a_planted", 1)):
        out, ref = reference(seed)
        if test == "test_a_planted":
            out[3, 2] += np.float32(1)
        share, at = largest(np.abs(out - ref) / (1e-5 + 1.3e-6 * np.abs(ref)))
        rows.append(
            {
                "test": f"test_checks.py::{test}",
                "kind": "output",
                **common,
                "rule": "allclose(rtol=1.3e-6, atol=0.00001)",
            }
            | {"figure": f"share {share}", "at": at, "result": "pass" if test == "test_holds" else "FAIL"}
        )
    out, ref = reference(2)
    other = out.copy()
    other[5, 1] = np.nextafter(other[5, 1], np.float32(9))
    ulp = np.ldexp(1.0, np.frexp(ref)[1] - 24)  # float32's ULP at each exact value
    figures = [largest(np.abs(run - ref) / ulp) for run in (out, other)]
    rows.append(
        {"test": "test_checks.py::test_runs", "kind": "output ×2 runs", **common, "rule": "ulp(max_ulp=1)"}
        | {"figure": "; ".join(f"{f} ULP" for f, _ in figures), "at": "; ".join(a for _, a in figures)}
        | {"result": "pass"}
    )
    return rows


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_the_summary_is_one_table_of_every_check(pytester, workers):
    pytester.makepyfile(test_checks=CHECKS)
    result = pytester.runpytest_subprocess(
        "-p", "symattn.pytest_plugin", "-p", "no:cacheprovider", "--symattn-summary", *workers
    )
    result.assert_outcomes(passed=2, failed=1)
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if "symattn: attention checks" in line)
    shown = lines[start + 1 : start + 6]
    assert shown == table(expected_rows())
    assert shown[-1] == "3 checks, 2 passed, 1 failed"


def test_without_the_option_there_is_no_table(pytester):
    pytester.makepyfile(test_checks=CHECKS)
    result = pytester.runpytest_subprocess("-p", "symattn.pytest_plugin", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    assert not any("symattn: attention checks" in line for line in result.outlines)
    assert any("fails torch.allclose's rule" in line and "at out[3, 2] (out " in line for line in result.outlines)


def test_the_entry_point_names_the_plugin_module():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["entry-points"]["pytest11"] == {"symattn.pytest_plugin": "symattn.pytest_plugin"}


def test_the_documented_example_runs_as_it_is(pytester):
    pytest.importorskip("torch")
    example = (ROOT / "docs" / "examples" / "test_sdpa_kernel.py").read_text(encoding="utf-8")
    pytester.makepyfile(test_sdpa_kernel=example)
    result = pytester.runpytest_subprocess("-p", "symattn.pytest_plugin", "-p", "no:cacheprovider", "--symattn-summary")
    result.assert_outcomes(passed=5)
    assert "5 checks, 5 passed, 0 failed" in result.outlines
