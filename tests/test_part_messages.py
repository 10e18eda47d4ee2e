"""The spec errors of issue 32's parts (the online softmax, positions, QK-norm, RoPE's angles and tables) are
said in the language asked for, from templates/lang/<lang>.toml, as the older parts' are."""

import pytest

from symattn.input import builtin
from symattn.input.errors import SpecError
from symattn.input.files import read_table
from symattn.input.messages import messages_in
from symattn.input.spec import load_spec

CASES = [
    (
        {"block_keys": 9},
        "block_keys: expected a whole number of keys from 1 to 3, got 9",
        "block_keys: 应为 1 到 3 之间的整数（键的个数），实为 9",
    ),
    (
        {"positions": [1]},
        "positions: expected 3 positions (one per row of the queries), got 1",
        "positions: 应为 3 个位置（查询的每一行一个），实为 1 个",
    ),
    (
        {"key_positions": "far"},
        "key_positions: expected a list of 3 positions (one per row of the keys), got a string",
        "key_positions: 应为 3 个位置的列表（键的每一行一个），实为 a string",
    ),
    (
        {"qk_norm": True, "qk_norm_eps": 2},
        "qk_norm_eps: 2 is outside what QK-norm takes: a number from 1/1000000000000 to 1",
        "qk_norm_eps: 2 超出了 QK-norm 接受的范围：应为 1/1000000000000 到 1 之间的数",
    ),
    (
        {"qk_norm": True, "rope": True},
        "qk_norm: QK-norm does not combine with RoPE yet",
        "qk_norm: QK-norm 暂时不能和 RoPE 一起用",
    ),
    (
        {"rope": True, "rope_frequencies": ["30 degrees"]},
        'rope_frequencies[1]: \'30 degrees\' is not an angle this reads: write "30deg", "pi/6" or "2pi/3"',
        'rope_frequencies[1]: \'30 degrees\' 不是能读懂的角度：请写 "30deg"、"pi/6" 或 "2pi/3"',
    ),
    (
        {"rope": True, "rope_cos": [[1], [1], [1]]},
        "rope_cos: give rope_sin too: the tables come as a pair",
        "rope_cos: 请同时给出 rope_sin：两张表要成对给出",
    ),
]


@pytest.mark.parametrize(("extra", "en", "zh"), CASES)
def test_each_message_is_said_in_english_and_chinese(extra, en, zh):
    seed = {k: v for k, v in read_table(builtin.example_path("seed", "en")).items() if k not in ("title", "lang")}
    for lang, message in (("en", en), ("zh", zh)):
        with messages_in(lang), pytest.raises(SpecError) as caught:
            load_spec({**seed, **extra})
        assert str(caught.value) == f"<dict>: {message}"
