"""Fuzzing the command line: whatever the spec, the claims or the arguments, the outcome is clean.

For every generated input, ``symattn`` must exit 0, 1 or 2; on 2 print exactly
one ``symattn:`` line and nothing else; leave an existing ``-o`` file byte for
byte as it was after a failure; and leave no temporary file behind.

The default run makes about 1,200 examples, the same ones every run (the suite's profile is
derandomized); ``pytest -m longfuzz`` makes about seventeen times as many (CI does not select it), and
``HYPOTHESIS_PROFILE=explore pytest -m longfuzz`` new ones each run.
"""

import io
import json
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symattn.cli.commands import main
from symattn.input.spec import SPEC_KEYS

OLD = b"old output \x00\xff"  # not UTF-8: a rewrite could never produce it by accident


@contextmanager
def captured():
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        yield out, err
    finally:
        sys.stdout, sys.stderr = saved


def outcome(argv: list[str]) -> tuple[int, str, str]:
    with captured() as (out, err):
        code = main(argv)
        out.flush()
        err.flush()
    return code, out.buffer.getvalue().decode("utf-8"), err.buffer.getvalue().decode("utf-8", "replace")


def assert_clean(folder: Path, argv: list[str], keep: set[str]) -> tuple[int, str, str]:
    target = folder / "out.txt"
    target.write_bytes(OLD)
    code, out, err = outcome(argv + ["-o", str(target)])
    assert code in (0, 1, 2), (code, err)
    if code == 2:
        assert out == "" and err.startswith("symattn: ") and err.count("\n") == 1 and err.endswith("\n"), err
        assert "Traceback" not in err
        assert target.read_bytes() == OLD
    else:
        assert target.read_bytes() != OLD
    # a Markdown document's figures are SVG files beside it, named after it (out.weights.svg ...)
    figures = {"out.weights.svg", "out.tokens.svg", "out.dz.svg"} if code != 2 and argv[0] == "render" else set()
    left = {p.name for p in folder.iterdir()} - figures
    assert left == keep | {"out.txt"}, "a temporary file was left behind"
    return code, out, err


# --- strategies -------------------------------------------------------------------------------


def numeral_texts() -> st.SearchStrategy[str]:
    digits = st.text("0123456789", min_size=1, max_size=4)
    return st.one_of(
        st.builds(lambda s, a, b: f"{s}{a}.{b}", st.sampled_from(["", "-", "+"]), digits, digits),
        st.builds(lambda a, b: f"{a}/{b}", digits, digits),
        st.builds(lambda a, e: f"{a}e{e}", digits, st.integers(-60, 60)),
        st.sampled_from(
            [
                "0,5",
                "٣",
                "３",
                "²",
                "inf",
                "-inf",
                "nan",
                "1e999",
                "1/0",
                "",
                " ",
                "1..2",
                "--1",
                "9" * 70,
                "40.3%",
                "1_000",
                "0x10",
                "1e-50",
                "99.5",
            ]
        ),
    )


def formula_texts() -> st.SearchStrategy[str]:
    atoms = st.sampled_from(
        ["a", "b", "x_1", "2", "0.5", "sqrt(2)", "exp(a)", "(a+b)", "inf", "__import__", "a.b", "sin(a)", "0"]
    )
    ops = st.sampled_from(["+", "-", "*", "/", "^", "^16^16", "^-1", " ", "(", ")"])
    return st.lists(st.tuples(atoms, ops), min_size=1, max_size=5).map(
        lambda parts: "".join(a + o for a, o in parts)[:-1] or "a"
    )


ANY_TEXT = st.text(max_size=12)
SCALARS = st.one_of(
    numeral_texts(),
    formula_texts(),
    ANY_TEXT,
    st.integers(-10, 10),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(ANY_TEXT, inner, max_size=3)),
    max_leaves=12,
)


def matrices(rows=st.integers(0, 4), cols=st.integers(0, 4), entries=SCALARS):
    return st.one_of(
        st.builds(lambda n, m, data: [[data.draw(entries) for _ in range(m)] for _ in range(n)], rows, cols, st.data()),
        st.lists(st.lists(entries, max_size=4), max_size=4),  # ragged
        VALUES,
    )


NUMBERS = st.one_of(st.integers(-9, 9), numeral_texts())
CLEAN_NUMBERS = st.one_of(
    st.integers(-9, 9),
    st.builds(lambda a, b: f"{a / 10:.1f}" if b else f"{a / 100:.2f}", st.integers(-30, 30), st.booleans()),
    st.builds(lambda a, b: f"{a}/{b}", st.integers(-5, 5), st.integers(1, 7)),
    st.sampled_from(["1e-1", "2.5e0", "0.000", "-0"]),
)
LABELS = st.text(st.sampled_from("abcXYZ09_[]{}$%&#^~\\ 小猫吃它é"), min_size=1, max_size=6)
SETTINGS = {
    "mask": st.sampled_from(["none", "causal"]),
    "scale": st.sampled_from(["sqrt", "none", "1/2", "0.25"]),
    "rounding": st.sampled_from(["exact", "hand"]),
    "expand": st.sampled_from(["focus", "all"]),
    "softmax": st.sampled_from(["plain", "stable"]),
    "lang": st.sampled_from(["en", "zh"]),
    "decimals": st.dictionaries(
        st.sampled_from(["scores", "scaled", "exp", "weights", "percent", "output"]), st.integers(0, 6), max_size=2
    ),
    "title": LABELS,
}


@st.composite
def specs(draw) -> dict:
    """Mostly valid specs (so that rendering is exercised), some noisy, some hostile."""
    n, m, d = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    mode = draw(st.sampled_from(["valid", "valid", "noisy", "hostile"]))
    entries = CLEAN_NUMBERS if mode != "hostile" else SCALARS
    spec = {
        "Q": [[draw(entries) for _ in range(d)] for _ in range(n)],
        "K": [[draw(entries) for _ in range(d)] for _ in range(m)],
        "V": [[draw(entries) for _ in range(d)] for _ in range(m)],
    }
    for key in draw(st.lists(st.sampled_from(sorted(SETTINGS)), max_size=4, unique=True)):
        spec[key] = draw(SETTINGS[key])
    if spec.get("mask") == "causal" and n > m:
        spec["mask"] = "none"  # a causal row with no key is refused, rightly; keep most examples renderable
    if draw(st.booleans()):
        spec["tokens"] = draw(st.lists(LABELS, min_size=n, max_size=n, unique=True))
    if n != m and draw(st.booleans()):
        spec["key_tokens"] = draw(st.lists(LABELS, min_size=m, max_size=m, unique=True))
    if mode == "noisy":
        spec[draw(st.sampled_from(SPEC_KEYS + ("maks", "Q\n")))] = draw(VALUES)
    if mode == "hostile":
        for key in draw(st.lists(st.sampled_from(SPEC_KEYS), max_size=3, unique=True)):
            spec[key] = draw(VALUES)
        if draw(st.booleans()):
            spec["tokens"] = draw(st.lists(ANY_TEXT, min_size=n, max_size=n))
        for key in draw(st.lists(st.sampled_from(["Q", "K", "V"]), max_size=1)):
            spec[key] = draw(matrices())
    return spec


def encode(spec: object, as_toml: bool) -> bytes:
    if not as_toml:
        return json.dumps(spec, ensure_ascii=True).encode()
    return toml(spec).encode("utf-8", "surrogatepass")


def toml(data: dict) -> str:
    """Just enough TOML for generated data: inline tables and arrays under top-level keys."""

    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if v is None:
            return '""'
        if isinstance(v, (int, float)):
            return repr(v) if v == v and abs(v) != float("inf") else {"nan": "nan"}.get(repr(v), repr(v))
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return "{" + ", ".join(f"{json.dumps(str(k))} = {value(x)}" for k, x in v.items()) + "}"

    return "".join(f"{json.dumps(str(k))} = {value(v)}\n" for k, v in data.items())


COMMANDS = st.sampled_from(
    [
        ["render"],
        ["render", "--format", "latex"],
        ["render", "--format", "latex", "--standalone"],
        ["render", "--rounding", "hand"],
        ["render", "--expand", "all"],
        ["compute", "--digits", "6"],
        ["compute", "--no-exact"],
    ]
)


FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
    derandomize=True,
)


def check_spec(spec: dict, as_toml: bool, command: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / ("s.toml" if as_toml else "s.json")
        path.write_bytes(encode(spec, as_toml))
        assert_clean(folder, command + [str(path), "--max-seconds", "20"], {path.name})


@settings(FUZZ, max_examples=500)
@given(specs(), st.booleans(), COMMANDS)
def test_fuzz_specs(spec, as_toml, command):
    check_spec(spec, as_toml, command)


CLAIM_SHAPES = {
    "sqrt_dk": (),
    "scores": (2, 2),
    "scaled": (2, 2),
    "exp": (2, 2),
    "exp_sum": (2,),
    "weights": (2, 2),
    "percent": (2, 2),
    "output": (2, 2),
}


def shaped(shape, numbers):
    if not shape:
        return numbers
    return st.lists(shaped(shape[1:], numbers), min_size=shape[0], max_size=shape[0])


@st.composite
def claims_files(draw) -> dict:
    spec = {
        "lang": draw(st.sampled_from(["en", "zh"])),
        "tokens": ["a", "b"],
        "Q": [[1, 0], [0, 1]],
        "K": [[1, 0], [0, 1]],
        "V": [[1, 2], [3, 4]],
    }
    if draw(st.booleans()):
        spec["mask"] = "causal"
    numbers = st.one_of(CLEAN_NUMBERS, st.sampled_from(["0.707", "0.330", "0.67", "2.028", "-inf", "−∞", "40.3%"]))
    claims = {}
    for q in draw(st.lists(st.sampled_from(sorted(CLAIM_SHAPES)), max_size=4, unique=True)):
        claims[q] = draw(shaped(CLAIM_SHAPES[q], numbers))
    for _ in range(draw(st.integers(0, 2))):
        q = draw(st.sampled_from(["scores", "scaled", "exp", "weights", "output"]))
        claims[f"{q}[{draw(st.integers(1, 2))}][{draw(st.integers(1, 2))}]"] = draw(numbers)
    if draw(st.booleans()):
        claims["rows"] = {
            draw(st.sampled_from(["a", "b", "1", "2"])): {
                q: draw(shaped(CLAIM_SHAPES[q][1:], numbers))
                for q in draw(
                    st.lists(st.sampled_from(["exp", "exp_sum", "weights", "output"]), max_size=3, unique=True)
                )
            }
        }
    if draw(st.integers(0, 3)) == 0:  # hostile: wrong keys, shapes and types
        quantities = st.sampled_from(["sqrt_dk", "scores", "weights", "Q", "rows", "nonsense"])
        keys = st.one_of(
            quantities, st.builds(lambda q, i: f"{q}[{i}][1]", quantities, st.sampled_from(["0", "3", "²", "9" * 12]))
        )
        claims.update(draw(st.dictionaries(keys, VALUES, max_size=3)))
    return {**spec, "claims": claims}


@settings(FUZZ, max_examples=300)
@given(claims_files(), st.booleans(), st.sampled_from(["text", "json", "markdown", "latex"]))
def test_fuzz_claims(data, as_toml, fmt):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / ("c.toml" if as_toml else "c.json")
        path.write_bytes(encode(data, as_toml))
        assert_clean(folder, ["check", str(path), "--format", fmt, "--max-seconds", "20"], {path.name})


FLAGS = {
    "render": ["--example", "--format", "--lang", "--focus", "--expand", "--rounding", "--subs", "--max-seconds"],
    "compute": ["--example", "--digits", "--subs", "--max-seconds"],
    "check": ["--format", "--lang", "--max-seconds"],
    "example": ["--lang", "--name"],
}
ARGUMENTS = st.one_of(
    st.sampled_from(
        [
            "seed",
            "causal",
            "symbolic",
            "multihead",
            "cross",
            "projection",
            "zh",
            "en",
            "小猫",
            "3",
            "0",
            "-1",
            "²",
            "all",
            "latex",
            "hand",
            "a=1",
            "a=",
            "=1",
            "../x",
            "/x",
            "1e9",
            "nan",
            "0.001",
        ]
    ),
    st.text(max_size=8),
)


@st.composite
def argument_lists(draw) -> list[str]:
    command = draw(st.sampled_from(sorted(FLAGS)))
    argv = [command]
    if command == "check":
        argv.append("--example")
    for flag in draw(st.lists(st.sampled_from(FLAGS[command]), max_size=3)):
        argv += [flag, draw(ARGUMENTS)]
    if command == "render" and draw(st.booleans()):
        argv.append("--standalone")
    return argv


@settings(FUZZ, max_examples=300)
@given(argument_lists())
def test_fuzz_arguments(argv):
    with tempfile.TemporaryDirectory() as tmp:
        assert_clean(Path(tmp), argv, set())


@settings(FUZZ, max_examples=100)
@given(st.binary(max_size=300), st.sampled_from(["s.toml", "s.json"]))
def test_fuzz_bytes(raw, name):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / name).write_bytes(raw)
        assert_clean(folder, ["render", str(folder / name)], {name})


# --- the long run: ten to twenty times as many examples, selected with -m longfuzz -------------------------

LONG = settings(FUZZ, max_examples=10_000)


@pytest.mark.longfuzz
@settings(LONG)
@given(specs(), st.booleans(), COMMANDS)
def test_long_fuzz_specs(spec, as_toml, command):
    check_spec(spec, as_toml, command)


@pytest.mark.longfuzz
@settings(LONG, max_examples=5_000)
@given(claims_files(), st.booleans(), st.sampled_from(["text", "json", "markdown", "latex"]))
def test_long_fuzz_claims(data, as_toml, fmt):
    test_fuzz_claims.hypothesis.inner_test(data, as_toml, fmt)


@pytest.mark.longfuzz
@settings(LONG, max_examples=5_000)
@given(argument_lists())
def test_long_fuzz_arguments(argv):
    test_fuzz_arguments.hypothesis.inner_test(argv)
