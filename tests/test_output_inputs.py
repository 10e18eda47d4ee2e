"""-o never replaces one of the command's own inputs, by any name or link (a helper's attack: ``compare
spec.toml o.npy -o o.npy`` replaced the kernel's output with the report)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from symattn.cli.commands import main


@pytest.fixture
def folder(tmp_path):
    rng = np.random.default_rng(0)
    for name in "qkvo":
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((1, 2, 16, 8)).astype(np.float32))
    (tmp_path / "spec.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n', encoding="utf-8")
    os.symlink(tmp_path / "o.npy", tmp_path / "link.npy")
    os.link(tmp_path / "q.npy", tmp_path / "hard.npy")
    return tmp_path


@pytest.mark.parametrize("target", ["o.npy", "link.npy", "q.npy", "hard.npy", "spec.toml"])
def test_compare_refuses_to_write_over_an_input(folder, capsys, target):
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    capsys.readouterr()
    code = main(["compare", str(folder / "spec.toml"), str(folder / "o.npy"), "-o", str(folder / target)])
    assert (code, capsys.readouterr().err) == (
        2,
        f"symattn: {folder / target}: is one of this command's own inputs; refusing to replace it (give another -o)\n",
    )
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before


def test_render_refuses_to_write_over_its_spec(folder, capsys):
    spec = folder / "spec.toml"
    text = spec.read_text(encoding="utf-8")
    capsys.readouterr()
    assert main(["render", str(spec), "-o", str(spec)]) == 2
    assert capsys.readouterr().err.endswith(
        "is one of this command's own inputs; refusing to replace it (give another -o)\n"
    )
    assert spec.read_text(encoding="utf-8") == text


def test_another_file_is_written(folder, capsys):
    assert main(["compare", str(folder / "spec.toml"), str(folder / "o.npy"), "-o", str(folder / "r.txt")]) in (0, 1)
    assert (folder / "r.txt").read_text(encoding="utf-8").startswith("The output of ")
