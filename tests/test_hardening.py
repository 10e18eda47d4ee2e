"""Bad input, hostile input and output paths: one line and a known exit code, never a traceback.

Every input reported in the hardening issue is here with its exact message.
"""

import json
import os
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from symattn.cli.commands import main

from .conftest import interruptible

ROOT = Path(__file__).resolve().parent.parent
SEED = {"lang": "en", "tokens": ["a", "b"], "Q": [[1, 0], [0, 1]], "K": [[1, 0], [0, 1]], "V": [[1, 2], [3, 4]]}
TINY = {"Q": [[1]], "K": [[1]], "V": [[1]]}
ALL_KEYS = (
    "K, Q, V, W_K, W_O, W_Q, W_V, X, X_kv, alibi, alibi_slopes, b_K, b_O, b_Q, b_V, backward, "
    "block_keys, causal_align, cjk_font, decimals, engine, expand, figures, focus, heading_level, heads, "
    "inputs, k_norm_weight, key_padding, key_positions, key_tokens, kv_heads, lang, layout, mask, "
    "mla, mla_route, notation, numbered, paper, positions, q_norm_weight, qk_norm, qk_norm_eps, rope, rope_base, "
    "rope_cos, rope_frequencies, rope_sin, rope_style, rounding, scale, sinks, softcap, softcap_order, softmax, "
    "split_keys, subs, title, tokens, "
    "window"
)
ONE_LINE = "labels and titles are one line of text"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def spec_file(tmp_path, data, name="s.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


# --- the table: (file content, extra arguments, message after "symattn: <file>: ") ---------------

TABLE = [
    # formulas that would grow without bound
    (
        {**TINY, "Q": [["((((((((16^16)^16)^16)^16)^16)^16)^16)^16)"]]},
        [],
        "Q[1][1]: a number in '((((((((16^16)^16)^16)^16)^16)^16)^16)^16)' has more than 4096 bits (the limit)",
    ),
    (
        {**TINY, "Q": [["(a+b+c+d+e+f+g+h)^16"]], "K": [["(a+b+c+d+e+f+g+h)^16"]]},
        [],
        "Q[1][1]: '(a+b+c+d+e+f+g+h)^16' has more than 1000 terms once multiplied out (the limit)",
    ),
    (
        {**TINY, "Q": [["(a+b+c+d+e+f)^3", "1"]], "K": [["(a+b+c+d+e+f)^3", "1"]]},
        [],
        "Q Kᵀ[1][1]: more than 1000 terms once multiplied out (the limit)",
    ),
    (
        {**TINY, "Q": [["a"] * 17], "K": [["1"] * 17]},
        [],
        "Q: 1×17 with symbols; at most 16 rows and columns may hold formulas",
    ),
    # scores whose exponentials no one could print
    (
        {"scale": "none", "Q": [["1e5"], [0]], "K": [["1e5"], [0]], "V": [[1], [2]]},
        [],
        "scaled[1][1]: |z| = |S·scale| is about 10000000000, more than 10000 (the limit): "
        "e^z would have about 4343000000 digits",
    ),
    (
        {"scale": "none", "Q": [["1e4"]], "K": [["1e4"]], "V": [[1]]},
        [],
        "scaled[1][1]: |z| = |S·scale| is about 100000000, more than 10000 (the limit): e^z would have about 43430000 digits",
    ),
    (
        {"scale": "1e50", "Q": [[1]], "K": [[1]], "V": [[1]]},
        [],
        "scaled[1][1]: |z| = |S·scale| is about 10^50, more than 10000 (the limit): e^z would have about 10^49 digits",
    ),
    (
        {"Q": [["1e10"]], "K": [[1]], "V": [[1]]},
        [],
        "scaled[1][1]: |z| = |S·scale| is about 10000000000, more than 10000 (the limit): "
        "e^z would have about 4343000000 digits",
    ),
    (
        {"Q": [["1e20"]], "K": [[1]], "V": [[1]]},
        [],
        "scaled[1][1]: |z| = |S·scale| is about 10^20, more than 10000 (the limit): e^z would have about 10^19 digits",
    ),
    (
        {"Q": [["99.5"]], "K": [["99.5"]], "V": [[1]], "notation": "fixed"},
        [],
        "exp[1][1]: a number with 4300 digits before the point; documents show at most 40 (compute gives "
        'significant digits, or notation = "auto")',
    ),
    (
        {"Q": [["99.5"]], "K": [["99.5"]], "V": [[1]], "rounding": "hand"},
        ["--notation", "fixed"],
        "exp[1][1]: a number with 4300 digits before the point; documents show at most 40 (compute gives "
        'significant digits, or notation = "auto")',
    ),
    # documents beyond what a page holds; compute and check take more
    (
        {"Q": [[0]] * 129, "K": [[0]] * 129, "V": [[0]] * 129},
        [],
        "Q: 129 rows; a document shows at most 128 (compute and check take up to 1024)",
    ),
    # Unicode digits where a number or an index is expected
    ({**SEED, "focus": "²"}, [], "focus: no token labelled '²'; tokens are a, b"),
    ({**SEED, "heads": "²"}, [], "heads: expected an integer from 1 to 16, got '²'"),
    ({**SEED, "decimals": {"scores": "²"}}, [], "decimals.scores: expected an integer from 0 to 50, got '²'"),
    ({**TINY, "Q": [["٣"]]}, [], "Q[1][1]: not a number: '٣' (digits must be 0-9)"),
    ({**TINY, "Q": [["３"]]}, [], "Q[1][1]: not a number: '３' (digits must be 0-9)"),
    ({**TINY, "Q": [["0,5"]]}, [], "Q[1][1]: not a number: '0,5' (a decimal comma? write '0.5')"),
    ({**TINY, "Q": [["inf"]]}, [], "Q[1][1]: not a finite number: 'inf'"),
    ({**TINY, "Q": [["nan"]]}, [], "Q[1][1]: not a finite number: 'nan'"),
    ({**TINY, "Q": [["2*inf"]]}, [], "Q[1][1]: 'inf' is not a symbol name (a letter, then letters, digits or _)"),
    (
        '{"Q": [[' + "9" * 5000 + ']], "K": [[1]], "V": [[1]]}',
        [],
        "Q[1][1]: number longer than 64 characters: '99999999999999999999'…",
    ),
    ({**SEED, "focus": "9" * 5000}, [], "focus: no token labelled '" + "9" * 50 + "…'; tokens are a, b"),
    # nesting, surrogates, separators, controls, invisible characters, characters no font of ours has
    ('{"Q": ' + "[" * 100_000 + "]" * 100_000 + "}", [], "lists and tables nested more than 32 deep (the limit)"),
    (
        '{"Q": [[1]], "K": [[1]], "V": [[1]], "tokens": ["\\udc80"]}',
        [],
        "tokens[1]: the character '\\udc80' (U+DC80) is a lone surrogate, not a character",
    ),
    (
        {**SEED, "tokens": ["a\u2028b", "c"]},
        [],
        "tokens[1]: the character '\\u2028' (U+2028 LINE SEPARATOR) is a control character or a line break; "
        + ONE_LINE,
    ),
    (
        {**SEED, "tokens": ["a\x85", "c"]},
        [],
        "tokens[1]: the character '\\x85' (U+0085) is a control character or a line break; " + ONE_LINE,
    ),
    (
        {**SEED, "tokens": ["a\x9b", "c"]},
        [],
        "tokens[1]: the character '\\x9b' (U+009B) is a control character or a line break; " + ONE_LINE,
    ),
    (
        {**SEED, "tokens": ["😀", "b"]},
        [],
        "tokens[1]: the character '😀' (U+1F600 GRINNING FACE) has no glyph in symattn's PDF fonts (Latin Modern, "
        "Noto, Fandol)",
    ),
    (
        {**SEED, "tokens": ["a\u200bb", "b"]},
        [],
        "tokens[1]: the character '\\u200b' (U+200B ZERO WIDTH SPACE) is invisible and would make two labels look alike",
    ),
    (
        {**SEED, "tokens": ["a\u202eb", "b"]},
        [],
        "tokens[1]: the character '\\u202e' (U+202E RIGHT-TO-LEFT OVERRIDE) is a bidirectional control; right-to-left "
        "text is ordered without it",
    ),
    # user text in messages stays on one line
    ({**SEED, "Q\nx": 1}, [], "Q\\nx: unknown key; expected one of " + ALL_KEYS),
    ({**SEED, "maks": "causal"}, [], "maks: unknown key; expected one of " + ALL_KEYS + " (did you mean 'mask'?)"),
    ({**SEED, "lang": "cn"}, [], "lang: expected en or zh, got 'cn'"),
    ({**SEED, "mask": "casual"}, [], "mask: expected one of 'none', 'causal', got 'casual' (did you mean 'causal'?)"),
    ({**SEED, "Q": [["1/a", 1], [0, 1]], "subs": {"a": 0}}, [], "Q[1][1]: division by zero: '1/a' with a = 0"),
    # a number written as text, read as a formula for its letter e: its exponent's limit names the place too
    ({**SEED, "Q": [["1e999999", 1], [0, 1]]}, [], "Q[1][1]: exponent out of range (at most 50): '1e999999'"),
    ({**SEED, "V": [[1, 0], [0, "2*1e51"]]}, [], "V[2][2]: exponent out of range (at most 50): '1e51'"),
    (
        {**SEED, "Q": [["a", 1], [0, 1]]},
        ["--subs", "b\x1b=1"],
        "--subs.b\\x1b: not a symbol name (a letter, then letters, digits or _)",
    ),
    # titles: text escaped, $…$ math passed through only when it is safe for every client
    ({**SEED, "title": "a $\\input{/etc/passwd}$"}, [], "title: \\input is not allowed in math"),
    ({**SEED, "title": "costs $5"}, [], "title: an unclosed $ (write \\$ for a dollar sign)"),
    ({**SEED, "title": "$x}{$"}, [], "title: unbalanced braces in $x}{$"),
    ({**SEED, "title": "$小猫$"}, [], "title: math $小猫$ may hold ASCII only (put words outside the $…$)"),
    # an output projection takes one row per column of the heads (Q, K, V given directly or projected)
    (
        {**SEED, "W_O": [[1, 0], [0, 1], [1, 1]]},
        [],
        "W_O: shape mismatch: the heads give 2 columns and W_O is 3×2; W_O needs one row per column",
    ),
]


@pytest.mark.parametrize("content, extra, message", TABLE)
def test_bad_input_table(tmp_path, capsys, content, extra, message):
    path = spec_file(tmp_path, content)
    code, out, err = run(capsys, "render", path, *extra)
    assert (code, out, err) == (2, "", f"symattn: {path}: {message}\n")


def test_toml_integer_of_thousands_of_digits(tmp_path, capsys):
    path = spec_file(tmp_path, "Q = [[" + "9" * 5000 + "]]\nK = [[1]]\nV = [[1]]\n", "s.toml")
    assert run(capsys, "render", path) == (
        2,
        "",
        f"symattn: {path}: an integer with thousands of digits; numbers may have at most 64 characters\n",
    )


def test_deep_inline_tables(tmp_path, capsys):
    path = spec_file(tmp_path, "Q = " + "{a=" * 3000 + "1" + "}" * 3000 + "\n", "s.toml")
    assert run(capsys, "render", path)[2] == f"symattn: {path}: lists and tables nested more than 32 deep (the limit)\n"


def test_nesting_just_past_the_limit_names_the_key(tmp_path, capsys):
    path = spec_file(tmp_path, {**SEED, "Q": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]})
    assert run(capsys, "render", path)[2] == (
        f"symattn: {path}: Q" + "[1]" * 31 + ": lists and tables nested more than 32 deep (the limit)\n"
    )


def test_file_names_are_escaped(tmp_path, capsys):
    path = tmp_path / "a\nb.json"
    escaped = str(path).replace("\n", "\\n")
    assert run(capsys, "render", path)[2] == f"symattn: {escaped}: cannot read file: No such file or directory\n"


def test_the_read_is_bounded(tmp_path, capsys):
    # a file that grows without end (here: larger than the limit) is refused before it is read whole
    path = tmp_path / "big.toml"
    path.write_bytes(b"#" * (4 * 1024 * 1024 + 1))
    assert (
        run(capsys, "render", path)[2] == f"symattn: {path}: larger than 4 MiB (the limit for a spec or claims file)\n"
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["render", "--focus", "²"], "{seed}: --focus: no token labelled '²'; tokens are 小猫, 吃, 它"),
        (["compute", "--digits", "١٥"], "argument --digits: expected a whole number, got '١٥'"),
        (
            ["render", "--max-seconds", "nan"],
            "argument --max-seconds: expected seconds above 0 and at most 86400, got 'nan'",
        ),
        (
            ["render", "--max-seconds", "0"],
            "argument --max-seconds: expected seconds above 0 and at most 86400, got '0'",
        ),
        (["serve", "--port", "99999"], "argument --port: expected a port from 0 to 65535, got '99999'"),
        (["serve", "--port", "-1"], "argument --port: expected a port from 0 to 65535, got '-1'"),
        (
            ["example", "--name", "/x"],
            "--name: no built-in example '/x'; choose one of alibi, backward, backward-mse, causal, cross, decode, flash, gqa, "
            "mla, mla-heads, mla-rope, multihead, projection, qk-norm, rope, rope-angles, seed, sinks, softcap, symbolic, window",
        ),
        (
            ["example", "--name", "../../x"],
            "--name: no built-in example '../../x'; choose one of alibi, backward, backward-mse, causal, cross, decode, flash, gqa, "
            "mla, mla-heads, mla-rope, multihead, projection, qk-norm, rope, rope-angles, seed, sinks, softcap, symbolic, window",
        ),
        (
            ["render", "--example", "../seed"],
            "--example: no built-in example '../seed'; choose one of alibi, backward, backward-mse, causal, cross, "
            "decode, flash, gqa, mla, mla-heads, mla-rope, multihead, projection, qk-norm, rope, rope-angles, seed, sinks, softcap, symbolic, window",
        ),
        (["render", "-o", ""], "'': empty file name"),
    ],
)
def test_bad_arguments(capsys, argv, message):
    from symattn.input import builtin

    code, out, err = run(capsys, *argv)
    seed = builtin.example_path("seed", "zh")
    assert (code, out, err) == (2, "", "symattn: " + message.format(seed=seed) + "\n")


def test_claim_keys_with_unicode_digits_and_huge_indices(tmp_path, capsys):
    for key, message in [
        ('"weights[²][1]"', "claims.weights[²][1]: unknown quantity"),
        ('"weights[' + "9" * 5000 + '][1]"', "an index has more than 9 digits"),
    ]:
        path = spec_file(
            tmp_path, 'lang = "en"\nQ = [[1]]\nK = [[1]]\nV = [[1]]\n[claims]\n' + key + " = 1\n", "c.toml"
        )
        code, _, err = run(capsys, "check", path)
        assert code == 2 and message in err and err.count("\n") == 1
    path = spec_file(tmp_path, 'lang = "en"\nQ = [[1]]\nK = [[1]]\nV = [[1]]\n[claims.rows."²"]\nexp = [1]\n', "c.toml")
    assert run(capsys, "check", path)[2] == f"symattn: {path}: claims.rows.²: no token labelled '²'; tokens are t1\n"


def test_big_but_valid_values_compute(tmp_path, capsys):
    # e^9900 and a weight of about 1e-2850 have correct significant digits, without a limit or a tie
    path = spec_file(tmp_path, {"Q": [["99.5"]], "K": [["99.5"]], "V": [[1]], "scale": "none"})
    code, out, _ = run(capsys, "compute", path, "--no-exact", "--digits", "5")
    assert code == 0 and json.loads(out)["exp"]["value"] == [["4.2067E+4299"]]
    path = spec_file(tmp_path, {"scale": "none", "Q": [[1], [0]], "K": [[0], [-6562]], "V": [[1], [2]]})
    code, out, _ = run(capsys, "compute", path, "--no-exact", "--digits", "5")
    assert code == 0 and json.loads(out)["weights"]["value"][0] == ["1.0000", "1.4441E-2850"]


@pytest.mark.parametrize("rounding", ["exact", "hand"])
def test_big_values_render_in_scientific_notation(tmp_path, capsys, rounding):
    path = spec_file(
        tmp_path, {"Q": [["99.5"]], "K": [["99.5"]], "V": [[1]], "scale": "none", "lang": "en", "rounding": rounding}
    )
    code, out, err = run(capsys, "render", path)
    assert (code, err) == (0, "")
    assert "&\\approx 4.207\\times 10^{4299} \\\\\n" in out


def test_long_exact_products_are_not_numbers_typed(tmp_path, capsys):
    x = "0." + "1" * 30
    path = spec_file(
        tmp_path, {"X": [[x, x], [x, "1"]], "W_Q": [[x, 1], [1, x]], "W_K": [[x, 1], [1, x]], "W_V": [[x, 1], [1, x]]}
    )
    code, out, err = run(capsys, "compute", path, "--no-exact", "--digits", "3")
    assert (code, err) == (0, "")


def test_time_limit(tmp_path, capsys):
    # 128 tokens at 1000 digits: several seconds of work since the flint engine (48×48 at 15 digits is 0.1 s)
    rows = [[str((i * 7 + j * 3) % 19 / 10) for j in range(48)] for i in range(128)]
    path = spec_file(tmp_path, {"Q": rows, "K": rows, "V": rows})
    assert run(capsys, "compute", path, "--digits", "1000", "--max-seconds", "0.5") == (
        2,
        "",
        f"symattn: {path}: took longer than 0.5 s (the time limit; raise it with --max-seconds)\n",
    )


# --- masked entries in the checker --------------------------------------------------------------

MASKED = {**SEED, "mask": "causal"}


def test_claims_on_masked_scores(tmp_path, capsys):
    path = spec_file(
        tmp_path,
        {
            **MASKED,
            "claims": {
                "scaled": [["0.707", "0.000"], ["0", "0.707"]],
                "exp[1][2]": "0",
                "weights[1][2]": 0,
                "weights[1][1]": 1,
            },
        },
    )
    code, out, _ = run(capsys, "check", path, "--format", "json")
    data = json.loads(out)
    assert code == 0
    assert [(c["key"], c["verdict"]) for c in data["claims"]] == [
        ("claims.scaled", "rounded"),
        ("claims.scaled", "exact"),
        ("claims.scaled", "exact"),
        ("claims.scaled", "rounded"),
        ("claims.exp[1][2]", "exact"),
        ("claims.weights[1][1]", "exact"),
        ("claims.weights[1][2]", "exact"),
    ]
    code, out, _ = run(capsys, "check", path)
    assert "0 = 0 (masked; compared with the score before the mask)" in out


def test_minus_infinity_claims(tmp_path, capsys):
    path = spec_file(tmp_path, {**MASKED, "claims": {"scaled": [["0.707", "-inf"], ["0", "−∞"]]}})
    code, out, _ = run(capsys, "check", path, "--format", "json")
    assert code == 1
    assert [(c["claimed"], c["verdict"]) for c in json.loads(out)["claims"]] == [
        ("0.707", "rounded"),
        ("-inf", "exact"),
        ("0", "exact"),
        ("−∞", "wrong"),
    ]


# --- -o: never harm what is there ----------------------------------------------------------------


def render_to(capsys, target, *extra):
    # how the file is written, not its figures (tests/test_figures.py writes those): the text is stdout's
    return run(capsys, "render", "--lang", "en", "--figures", "none", *extra, "-o", target)


def expected_text(capsys):
    return run(capsys, "render", "--lang", "en")[1]


def test_new_file_gets_the_umask(tmp_path, capsys):
    old = os.umask(0o027)
    try:
        assert render_to(capsys, tmp_path / "new.md")[0] == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.md").stat().st_mode) == 0o640


def test_existing_file_keeps_its_mode(tmp_path, capsys):
    target = tmp_path / "out.md"
    target.write_text("old")
    target.chmod(0o604)
    assert render_to(capsys, target)[0] == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o604
    assert target.read_text(encoding="utf-8") == expected_text(capsys)


def test_symlink_writes_its_target(tmp_path, capsys):
    real = tmp_path / "real.md"
    real.write_text("old")
    link = tmp_path / "link.md"
    link.symlink_to(real.name)
    assert render_to(capsys, link)[0] == 0
    assert link.is_symlink() and os.readlink(link) == "real.md"
    assert real.read_text(encoding="utf-8") == expected_text(capsys)


def test_dangling_symlink_creates_its_target(tmp_path, capsys):
    link = tmp_path / "link.md"
    link.symlink_to("made.md")
    assert render_to(capsys, link)[0] == 0
    assert link.is_symlink() and (tmp_path / "made.md").read_text(encoding="utf-8") == expected_text(capsys)


def test_hard_links_stay_linked(tmp_path, capsys):
    a, b = tmp_path / "a.md", tmp_path / "b.md"
    a.write_text("old")
    os.link(a, b)
    inode = a.stat().st_ino
    assert render_to(capsys, b)[0] == 0
    assert a.stat().st_ino == b.stat().st_ino == inode and a.stat().st_nlink == 2
    assert a.read_text(encoding="utf-8") == expected_text(capsys)


def test_fifo_is_written_not_replaced(tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    while True:  # wait until the reader has the FIFO open
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
            break
        except OSError:
            threading.Event().wait(0.01)
    # the probe's close may end the reader's read early; read again until the text arrives
    reader.join()
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    threading.Event().wait(0.2)
    assert render_to(capsys, fifo)[0] == 0
    reader.join(10)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert got[-1].decode("utf-8") == expected_text(capsys)


def test_fifo_without_reader_is_one_line(tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert render_to(capsys, fifo) == (2, "", f"symattn: {fifo}: cannot write: the FIFO has no reader\n")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="making device nodes needs root (CI runs as root)")
def test_device_nodes_stay_devices(tmp_path, capsys):
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a null device inside the test's own folder
    before = null.lstat()
    assert render_to(capsys, null)[0] == 0
    after = null.lstat()
    assert stat.S_ISCHR(after.st_mode) and (after.st_mode, after.st_rdev, after.st_ino) == (
        before.st_mode,
        before.st_rdev,
        before.st_ino,
    )
    full = tmp_path / "full"
    os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    assert render_to(capsys, full) == (74, "", f"symattn: {full}: cannot write: no space left on device\n")
    assert stat.S_ISCHR(full.lstat().st_mode)


def test_read_only_file_is_refused(tmp_path, capsys):
    target = tmp_path / "ro.md"
    target.write_text("keep")
    target.chmod(0o444)
    assert render_to(capsys, target) == (
        2,
        "",
        f"symattn: {target}: the file is read-only (mode 0444); refusing to replace it\n",
    )
    assert target.read_text() == "keep"


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p.mkdir(), "is a folder; give a file name"),
        (lambda p: None, "cannot write: the folder {parent}/missing does not exist"),
    ],
)
def test_unwritable_targets(tmp_path, capsys, make, message):
    target = tmp_path / "t"
    make(target)
    if "missing" in message:
        target = tmp_path / "missing" / "t"
    code, out, err = render_to(capsys, target)
    assert (code, out, err) == (2, "", f"symattn: {target}: {message.format(parent=tmp_path)}\n")


def test_a_failure_leaves_the_old_file_and_no_temporary(tmp_path, capsys):
    target = tmp_path / "out.md"
    target.write_bytes(b"old\x00bytes")
    bad = spec_file(tmp_path, {**SEED, "Q": [["x/0", 1], [0, 1]]})
    assert run(capsys, "render", bad, "-o", target)[0] == 2
    assert target.read_bytes() == b"old\x00bytes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.md", "s.json"]


# --- the streams --------------------------------------------------------------------------------


def cli(*argv, **kw):
    env = {**os.environ, "PYTHONPATH": str(ROOT), **kw.pop("env", {})}
    if "stdout" in kw:
        return subprocess.run([sys.executable, "-m", "symattn", *argv], stderr=subprocess.PIPE, env=env, **kw)
    return subprocess.run([sys.executable, "-m", "symattn", *argv], capture_output=True, env=env, **kw)


def test_stdout_is_utf8_whatever_the_locale():
    done = cli("render", env={"PYTHONIOENCODING": "ascii", "LC_ALL": "C"})
    assert done.returncode == 0 and done.stderr == b""
    assert done.stdout.decode("utf-8").startswith("# Transformer 注意力")


def test_errors_in_an_ascii_terminal():
    done = cli("render", "--focus", "狗", env={"PYTHONIOENCODING": "ascii"})
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode("ascii").count("\n") == 1
    assert "no token labelled '\\u72d7'" in done.stderr.decode("ascii")


def test_broken_pipe_is_quiet():
    # the reader is gone before anything is written, as after `symattn render | head -c 1`
    read, write = os.pipe()
    os.close(read)
    try:
        done = cli("render", stdout=write)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, b"")


def test_ctrl_c_is_one_line():
    rows = [[str((i * 7 + j * 3) % 19 / 10) for j in range(40)] for i in range(40)]
    spec = json.dumps({"Q": rows, "K": rows, "V": rows})
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from symattn.cli.commands import main; "
            f"open('s.json', 'w').write({spec!r}); sys.exit(main(['compute', 's.json']))",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=os.environ.get("TMPDIR", "/tmp"),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=interruptible,
    )
    threading.Event().wait(3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(60)
    assert (proc.returncode, err) == (130, b"symattn: interrupted\n")
