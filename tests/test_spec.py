import json
from fractions import Fraction

import pytest

from symattn.input.errors import ShapeError, SpecError
from symattn.input.spec import Decimals, load_spec


def values(matrix):
    return [[x.value for x in row] for row in matrix]


def test_toml_floats_are_read_from_their_text(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text("Q = [[0.1, 1.0]]\nK = [[0.2, 3]]\nV = [[1e-2]]\n", encoding="utf-8")
    spec = load_spec(path)
    assert values(spec.Q) == [[Fraction(1, 10), Fraction(1)]]
    assert spec.Q[0][1].text == "1.0"
    assert spec.V[0][0].value == Fraction(1, 100)
    assert spec.tokens == ("t1",)
    assert spec.source == str(path)


def test_json_numbers_are_read_from_their_text(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"Q": [[0.1]], "K": [[0.30000000000000004]], "V": [[2]], "focus": 1}))
    spec = load_spec(path)
    assert values(spec.Q) == [[Fraction(1, 10)]]
    assert values(spec.K) == [[Fraction(30000000000000004, 10**17)]]
    assert spec.focus == 0


def test_defaults(seed):
    spec = load_spec(seed)
    assert (spec.focus, spec.document.lang, spec.scale, spec.rounding, spec.document.expand) == (
        2,
        "en",
        "sqrt",
        "exact",
        "focus",
    )
    assert spec.decimals == Decimals(3, 3, 3, 3, 3, 1, 3)
    assert spec.d_k == 2


def test_focus_by_label_or_index(seed):
    assert load_spec({**seed, "focus": "吃"}).focus == 1
    assert load_spec({**seed, "focus": 1}).focus == 0
    assert load_spec(seed).with_options(focus="2").focus == 1


def test_with_options_rejects_unknown_setting(seed):
    with pytest.raises(TypeError, match=r"^Unknown setting 'colour'\.$"):
        load_spec(seed).with_options(colour="red")


def test_scale_number(seed):
    spec = load_spec({**seed, "scale": "1/2"})
    assert spec.scale.value == Fraction(1, 2)


BAD = [
    (
        {"colour": 1},
        SpecError,
        "<dict>: colour: unknown key; expected one of K, Q, V, W_K, W_O, W_Q, W_V, X, X_kv, "
        "alibi, alibi_slopes, b_K, b_O, b_Q, b_V, backward, block_keys, causal_align, cjk_font, decimals, "
        "engine, expand, figures, focus, heading_level, heads, inputs, k_norm_weight, key_padding, "
        "key_positions, key_tokens, kv_heads, lang, layout, mask, mla, mla_route, notation, numbered, paper, positions, "
        "q_norm_weight, qk_norm, qk_norm_eps, rope, rope_base, rope_cos, rope_frequencies, rope_sin, "
        "rope_style, rounding, scale, sinks, softcap, softcap_order, softmax, split_keys, subs, title, tokens, window",
    ),
    ({"Q": None}, SpecError, "<dict>: Q: expected a matrix (a list of rows), got null"),
    ({"Q": []}, SpecError, "<dict>: Q: empty matrix"),
    ({"Q": [[]]}, SpecError, "<dict>: Q[1]: empty row"),
    ({"Q": "1,2"}, SpecError, "<dict>: Q: expected a matrix (a list of rows), got a string"),
    ({"Q": [[1, 0], [0]]}, SpecError, "<dict>: Q[2]: row has 1 entries but row 1 has 2"),
    ({"Q": [[1, 0], [0, 1], [0.9, "1..2"]]}, SpecError, "<dict>: Q[3][2]: not a number: '1..2'"),
    ({"Q": [[1, 0], [0, 1], [0.9, "a+"]]}, SpecError, "<dict>: Q[3][2]: unexpected end of 'a+'"),
    ({"V": [[1, 0], [0, 1], [1, True]]}, SpecError, "<dict>: V[3][2]: not a number: true"),
    (
        {"K": [[1, 0, 0], [0, 1, 0], [0, 0, 1]]},
        ShapeError,
        "<dict>: K: shape mismatch: Q is 3×2 and K is 3×3; Q and K need the same number of columns (d_k)",
    ),
    (
        {"K": [[1, 0], [0, 1]], "V": [[1, 0], [0, 1]], "key_tokens": ["a"]},
        SpecError,
        "<dict>: key_tokens: 1 labels for 2 rows of K",
    ),
    (
        {"key_tokens": ["a", "b", "c"]},
        SpecError,
        "<dict>: key_tokens: only for cross-attention (X_kv, or Q with a different number of rows from K and V)",
    ),
    (
        {"V": [[1, 0], [0, 1]]},
        ShapeError,
        "<dict>: V: shape mismatch: K is 3×2 and V is 2×2; V needs one row per row of K",
    ),
    ({"tokens": ["a", "b"]}, SpecError, "<dict>: tokens: 2 labels for 3 rows of Q"),
    ({"tokens": ["a", "b", "a"]}, SpecError, "<dict>: tokens[3]: duplicate label 'a' (also tokens[1])"),
    ({"tokens": ["a", "", "c"]}, SpecError, "<dict>: tokens[2]: empty text"),
    (
        {"tokens": ["a", "b\nc", "d"]},
        SpecError,
        "<dict>: tokens[2]: the character '\\n' (U+000A) is a control character or a line break; labels and titles "
        "are one line of text",
    ),
    ({"tokens": ["a", 2, "c"]}, SpecError, "<dict>: tokens[2]: expected a string, got a number"),
    ({"focus": "dog"}, SpecError, "<dict>: focus: no token labelled 'dog'; tokens are 小猫, 吃, 它"),
    ({"focus": 4}, SpecError, "<dict>: focus: 4 is out of range 1..3"),
    (
        {"scale": "cube"},
        SpecError,
        "<dict>: scale: expected 'sqrt', 'none' or an exact number such as '1/2', got 'cube'",
    ),
    ({"scale": "-1"}, SpecError, "<dict>: scale: must be positive, got '-1'"),
    ({"scale": 1e300}, SpecError, "<dict>: scale: exponent out of range (at most 50): '1e+300'"),  # not "not exact"
    ({"rounding": "banker"}, SpecError, "<dict>: rounding: expected one of 'exact', 'hand', got 'banker'"),
    ({"lang": "fr-CA"}, SpecError, "<dict>: lang: expected en or zh, got 'fr-CA'"),
    ({"lang": "cn"}, SpecError, "<dict>: lang: expected en or zh, got 'cn'"),
    ({"decimals": {"weights": 99}}, SpecError, "<dict>: decimals.weights: expected an integer from 0 to 50, got 99"),
    (
        {"decimals": {"colour": 1}},
        SpecError,
        "<dict>: decimals.colour: unknown key; expected one of scores, sqrt_dk, scaled, exp, weights, percent, output, gradients",
    ),
    (
        {"Q": [[0] * 2] * 1025, "K": [[0] * 2] * 1025, "V": [[0]] * 1025, "tokens": None},
        SpecError,
        "<dict>: Q: 1025 rows; at most 1024 are supported",
    ),
    ({"Q": [[0] * 1025] * 3}, SpecError, "<dict>: Q[1]: 1025 columns; at most 1024 are supported"),
    ({"title": "x" * 201}, SpecError, "<dict>: title: longer than 200 characters"),
]


@pytest.mark.parametrize("change, kind, message", BAD)
def test_bad_input(seed, change, kind, message):
    with pytest.raises(kind) as info:
        load_spec({**seed, **change})
    assert str(info.value) == message


def test_missing_matrix():
    with pytest.raises(SpecError) as info:
        load_spec({"Q": [[1]], "K": [[1]]})
    assert str(info.value) == "<dict>: V: missing"


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("bad.toml", "Q = [[1,", "bad.toml: invalid TOML: "),
        ("bad.json", '{"Q": [[1,]]}', "bad.json: invalid JSON at line 1, column 11: Expecting value"),
        ("nan.json", '{"Q": [[NaN]]}', "nan.json: not a finite number: NaN"),
        ("inf.toml", "Q = [[inf]]\nK = [[1]]\nV = [[1]]", "inf.toml: Q[1][1]: not a finite number: 'inf'"),
        ("list.json", "[1, 2]", "list.json: expected a JSON object, got a list"),
    ],
)
def test_bad_files(tmp_path, monkeypatch, name, text, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(name)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)
