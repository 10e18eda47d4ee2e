"""Document options beside the attention math (issue 29): Spec.document holds how a document reads, Spec.kernel
what the input files brought; the exact model, the float64 engine and the certificates never read the first."""

from __future__ import annotations

import ast
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pytest

from symattn.derivation.derive import derive
from symattn.exact.factory import build
from symattn.input import builtin
from symattn.input.document import DOCUMENT_KEYS, DocumentOptions
from symattn.input.errors import SpecError
from symattn.input.kernel_inputs import NO_FILES, KernelInputs
from symattn.input.spec import Spec, load_spec

PACKAGE = Path(__file__).resolve().parent.parent / "symattn"


def test_the_spec_holds_no_document_option_and_no_file_plumbing():
    own = {f.name for f in fields(Spec)}
    assert own & set(DOCUMENT_KEYS) == set()
    assert own & {"layout", "batches", "sources"} == set()
    assert {"document", "kernel"} <= own


def test_the_exact_model_the_kernel_and_the_certificates_never_read_document_options():
    found = []
    for folder in ("exact", "kernel", "certificates"):
        for path in sorted((PACKAGE / folder).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module == "symattn.input.document":
                    found.append(f"{folder}/{path.name}: imports symattn.input.document")
                elif isinstance(node, ast.Attribute) and node.attr == "document":
                    found.append(f"{folder}/{path.name}:{node.lineno}: reads .document")
    assert found == []


def test_a_spec_file_gives_the_math_and_its_document_options():
    spec = load_spec(builtin.example_path("seed", "zh"))
    assert spec.document == DocumentOptions(title="Transformer 注意力：Q/K/V 手算示例", lang="zh")
    assert spec.document.page == "a4"
    assert (spec.focus, spec.rounding, spec.notation, spec.kernel) == (2, "exact", "auto", NO_FILES)


def test_every_document_key_is_read_into_the_options(seed):
    raw = {
        **seed,
        "title": "Heads",
        "lang": "en",
        "expand": "all",
        "paper": "a4",
        "engine": "xelatex",
        "cjk_font": "fandol",
        "heading_level": 2,
        "numbered": True,
        "figures": "weights",
    }
    assert load_spec(raw).document == DocumentOptions(
        "Heads", "en", "all", "a4", "xelatex", "fandol", 2, True, "weights"
    )


def test_the_command_lines_settings_change_the_options_and_keep_the_math(seed):
    spec = load_spec(seed)
    changed = spec.with_options(lang="zh", expand="all", paper="letter", heading_level="3", rounding="hand")
    assert changed.document == DocumentOptions(lang="zh", expand="all", paper="letter", heading_level=3)
    assert changed.rounding == "hand"
    assert replace(changed, rounding="exact", document=spec.document) == spec


def test_the_same_math_makes_the_same_model_whatever_the_document(seed):
    plain, dressed = load_spec(seed), load_spec({**seed, "title": "T", "lang": "zh", "figures": "none"})
    assert build(plain).weights == build(dressed).weights
    assert derive(plain).steps == derive(replace(dressed, document=plain.document)).steps


def test_a_bad_document_key_still_names_itself(seed):
    with pytest.raises(SpecError) as info:
        load_spec({**seed, "paper": "a5"})
    assert str(info.value) == "<dict>: paper: expected one of 'a4', 'letter', got 'a5'"


def test_files_bring_their_kernel_inputs(tmp_path):
    for name in ("q", "k", "v"):
        np.save(tmp_path / f"{name}.npy", np.ones((2, 3, 4)))
    path = tmp_path / "spec.toml"
    path.write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\nlayout = "bnhd"\n', encoding="utf-8")
    spec = load_spec(path)
    assert spec.kernel == KernelInputs(
        "bnhd", (), (("Q", str(tmp_path / "q.npy")), ("K", str(tmp_path / "k.npy")), ("V", str(tmp_path / "v.npy")))
    )
    assert (spec.heads, spec.kernel.batch, spec.of_batch(0) is spec) == (3, 1, True)
