"""A plain spec's ``sinks`` and ``alibi_slopes`` from a ``.npy`` or ``.safetensors`` file (issue 30): one float
per head, read by the reader and limits of Q's files, each value its exact decimal, so ``symattn compare`` gives
the report of the same numbers written as a list; bad files are one line naming the spec, the key, the file
and the place (0-based, as numpy indexes).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_compare_spec_variants import cli, write

H, N, D = 4, 10, 8
SINKS = np.array([0.5, -1.25, 2, 0.100000001490116119384765625], dtype=np.float32)  # float32's 0.1 last
SLOPES = np.array([0.5, 0.25, 0.125, 0.0625], dtype=np.float64)


@pytest.fixture
def folder(tmp_path):
    rng = np.random.default_rng(1)
    for name in ("q", "k", "v"):
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((2, H, N, D)).astype(np.float32))
    np.save(tmp_path / "o.npy", rng.standard_normal((2, H, N, D)).astype(np.float32) / 4)
    np.save(tmp_path / "sinks.npy", SINKS)
    np.save(tmp_path / "slopes.npy", SLOPES)
    return tmp_path


def spec(folder, *lines: str) -> str:
    return write(folder, lines)


def test_a_file_of_sinks_or_slopes_is_the_list_of_its_exact_decimals(folder, capsys):
    listed = ", ".join(str(float(x)) for x in SINKS[:3]) + ", 0.100000001490116119384765625"
    as_list = cli(capsys, spec(folder, f"sinks = [{listed}]"), folder / "o.npy", "--format", "json")
    assert as_list[0] == 0 and as_list[2] == "" and '"float64"' in as_list[1]
    assert cli(capsys, spec(folder, 'sinks = "sinks.npy"'), folder / "o.npy", "--format", "json") == as_list
    as_list = cli(
        capsys, spec(folder, "alibi_slopes = [0.5, 0.25, 0.125, 0.0625]"), folder / "o.npy", "--format", "json"
    )
    assert cli(capsys, spec(folder, 'alibi_slopes = "slopes.npy"'), folder / "o.npy", "--format", "json") == as_list


def test_a_safetensors_file_of_sinks_is_read_by_name(folder, capsys):
    from safetensors.numpy import save_file

    save_file({"sinks": SINKS, "other": SINKS[:2].copy()}, str(folder / "w.safetensors"))
    expected = cli(capsys, spec(folder, 'sinks = "sinks.npy"'), folder / "o.npy", "--format", "json")
    assert cli(capsys, spec(folder, 'sinks = "w.safetensors:sinks"'), folder / "o.npy", "--format", "json") == expected


@pytest.mark.parametrize(
    ("key", "saved", "message"),
    [
        ("sinks", np.array([0.5, np.nan, 1, 2]), "sinks: 'bad.npy'[1]: not a finite number: nan"),
        (
            "sinks",
            np.array([0.5, 1, 2, -150.0]),
            "sinks: 'bad.npy'[3]: a sink logit must be at most 100 in size, got -150",
        ),
        ("sinks", np.ones((2, 2)), "sinks: 'bad.npy': expected shape (4,), one number per head, got (2, 2)"),
        (
            "sinks",
            np.ones(3, dtype=np.int32),
            "sinks: 'bad.npy': descr: expected a float16, bfloat16, float32 or float64 array (header \"{'descr': '<i4', "
            "'fortran_order': False, 'shape': (3,), }\")",
        ),
        (
            "alibi_slopes",
            np.array([0.5, 0.25, 0.0, 1]),
            "alibi_slopes: 'bad.npy'[2]: a slope must be > 0 and at most 100, got 0",
        ),
        ("alibi_slopes", np.array([0.5, np.inf, 1, 1]), "alibi_slopes: 'bad.npy'[1]: not a finite number: inf"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_key_the_file_and_the_place(folder, capsys, key, saved, message):
    np.save(folder / "bad.npy", saved)
    path = spec(folder, f'{key} = "bad.npy"')
    assert cli(capsys, path, folder / "o.npy") == (2, "", f"symattn: {path}: {message}\n")


def test_a_sinks_file_is_found_as_q_s_files_are(folder, capsys):
    path = spec(folder, 'sinks = "../sinks.npy"')
    assert cli(capsys, path, folder / "o.npy") == (
        2,
        "",
        f"symattn: {path}: sinks: '../sinks.npy': a file name may not go up a folder (..)\n",
    )
    path = spec(folder, 'sinks = "missing.npy"')
    assert cli(capsys, path, folder / "o.npy") == (
        2,
        "",
        f"symattn: {path}: sinks: 'missing.npy': cannot read file: No such file or directory\n",
    )
