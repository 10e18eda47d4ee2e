"""Each document speaks one language: no English in Chinese prose, no Chinese in English prose.

Math names (Q, K, V, X, W, softmax, Attention …) and the user's own labels and
title are allowed; everything else a document says must be in its language.
"""

import re

import pytest

from symattn.checking.checker import check
from symattn.derivation.derive import derive
from symattn.input import builtin
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render, render_report

# words a Chinese handout keeps in Latin letters: the names of the math, and the name of the model
MATH_NAMES = {
    "Q",
    "K",
    "V",
    "X",
    "W",
    "O",
    "S",
    "A",
    "softmax",
    "Softmax",
    "Attention",
    "Transformer",
    "SymPy",
    # the models and libraries that the modern variants are named after (issue 20)
    "Llama",
    "Mistral",
    "Gemma",
    "PaLM",
    "Falcon",
    "FlashAttention",
    "torch",
    "is_causal",
    "OLMo",  # QK-norm (issue 32): the models that use it and the norm's name
    "RMSNorm",
    "QK",  # QK-norm
    "norm",
    "MLA",  # multi-head latent attention (issue 32): its name, its models and its kernel
    "DeepSeek",
    "FlashMLA",
    "ALiBi",  # issue 20's variants and the models that use them: names, in every language
    "BLOOM",
    "MPT",
    "gpt",  # gpt-oss
    "oss",
    "Concat",
    "head",
    "model",
    "d_k",
    "d_model",
    "d_head",
    "b_O",
    "W_O",
    "W_Q",
    "W_K",
    "W_V",
    "e",
    "z",
    "mathrm",
    "text",
    "frac",
    "dfrac",
    "sqrt",
    "top",
    "to",
    "times",
    "approx",
    "cdot",
    "left",
    "right",
    "begin",
    "end",
    "bmatrix",
    "aligned",
    "array",
    "leftarrow",
    "alpha",
    "sum_k",
    "infty",
    "le",
    "quad",
    "ldots",
    "exp",
    # RoPE's models and paper, by name
    "RoPE",
    "RoFormer",
    "Qwen",
}
WORD = re.compile(r"[A-Za-z][A-Za-z_]*")
CJK = re.compile(r"[\u3000-\u30ff\u3400-\u9fff\uff00-\uffef]")


def prose_words(text: str, labels) -> set[str]:
    """Latin-letter words of the prose: outside math (but inside math's \\text{}), labels taken out."""
    for label in sorted(filter(None, labels), key=len, reverse=True):
        text = re.sub(rf"(?<![A-Za-z\\\\]){re.escape(label)}(?![A-Za-z])", " ", text)
    texts = " ".join(re.findall(r"\\text\{([^{}]*)\}", text))
    text = re.sub(r"\d+(?:\.\d+)?(?:pt|em|ex)\b", " ", text)  # lengths (\emergencystretch=2em)
    for pattern in (
        r"\$\$.*?\$\$",
        r"\$[^$]*\$",
        r"\\\[.*?\\\]",
        r"\\\(.*?\\\)",
        r"\\begin\{align\*\}.*?\\end\{align\*\}",
        r"`[^`]*`",  # code is no prose
    ):
        text = re.sub(pattern, " ", text, flags=re.S)
    text = re.sub(r"\\[A-Za-z]+\*?(\[[^]]*\])?(\{(?:[^{}]|\{[^{}]*\})*\})*", " ", text + " " + texts)
    text = re.sub(r"(?<![A-Za-z])[A-Za-z]\\?_(\{[^}]*\}|[A-Za-z0-9]+)", " ", text)  # d_k, W_Q written as text
    return {w for w in WORD.findall(text) if w not in MATH_NAMES}


@pytest.mark.parametrize("fmt", ["markdown", "latex"])
@pytest.mark.parametrize("name", builtin.names())
def test_chinese_documents_are_chinese(name, fmt):
    spec = load_spec(builtin.example_path(name, "zh")).with_options(expand="all")
    text = render(derive(spec), fmt, standalone=True) if fmt == "latex" else render(derive(spec), fmt)
    if fmt == "latex":
        text = text[text.index("\\begin{document}") :]
        # a figure's TikZ is code: only its nodes' texts are words
        text = re.sub(
            r"\\begin\{tikzpicture\}.*?\\end\{tikzpicture\}",
            lambda m: " ".join(re.findall(r"\] at \([^)]*\) \{(.*)\};$", m.group(0), re.M)),
            text,
            flags=re.S,
        )
    labels = list(spec.tokens) + list(spec.keys) + [spec.document.title or ""]
    assert prose_words(text, labels) == set()


@pytest.mark.parametrize("fmt", ["markdown", "latex"])
@pytest.mark.parametrize("name", builtin.names())
def test_english_documents_are_english(name, fmt):
    spec = load_spec(builtin.example_path(name, "en")).with_options(expand="all")
    text = render(derive(spec), fmt)
    for label in list(spec.tokens) + list(spec.keys) + [spec.document.title or ""]:
        text = text.replace(label, " ")
    assert CJK.findall(text) == []


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_chinese_report_is_chinese(fmt):
    report = check(None, str(builtin.example_path("seed-claims", "zh")))
    text = render_report(report, fmt)
    text = re.sub(r"= .*$", "", text, flags=re.M) if fmt == "text" else text  # closed forms are SymPy's
    text = re.sub(r"\$[^$]*\$", " ", text)
    words = prose_words(text, list(report.tokens) + [report.source, report.title or ""])
    assert words == set()


def test_the_check_catches_english_in_chinese():
    assert prose_words("步骤 1：层层 refined", []) == {"refined"}
