"""Shared fixtures: the seed spec, real clients (KaTeX, TeX Live), golden files."""

from __future__ import annotations

import difflib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
KATEX_DIR = Path(__file__).resolve().parent / "katex"

SEED = {
    "tokens": ["小猫", "吃", "它"],
    "Q": [["1.0", "0.0"], ["0.0", "1.0"], ["0.9", "0.1"]],
    "K": [["1.0", "0.2"], ["0.1", "1.0"], ["0.8", "0.3"]],
    "V": [[10, 0], [0, 10], [1, 1]],
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--regen-golden", action="store_true", help="rewrite the golden files from the current output")


@pytest.fixture
def seed() -> dict:
    return {k: (list(v) if isinstance(v, list) else v) for k, v in SEED.items()}


@pytest.fixture
def golden(request: pytest.FixtureRequest):
    """Compare text with tests/golden/<name>; --regen-golden rewrites it."""

    def check(name: str, text: str) -> None:
        path = GOLDEN / name
        if request.config.getoption("--regen-golden"):
            path.write_text(text, encoding="utf-8", newline="\n")
            return
        expected = path.read_text(encoding="utf-8")
        if text != expected:
            diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True),
                                                f"golden/{name}", "rendered", n=2))
            pytest.fail(f"output differs from golden/{name} (run pytest --regen-golden to accept):\n{diff}")

    return check


# --- KaTeX -----------------------------------------------------------------

_DISPLAY = re.compile(r"^\$\$\n(.*?)\n\$\$$", re.S | re.M)
_INLINE = re.compile(r"(?<![\\$])\$(?!\$)((?:\\.|[^$\\])+?)\$")


def math_spans(markdown: str) -> list[dict]:
    """Every $$…$$ block and $…$ span of rendered Markdown."""
    spans = [{"tex": m.group(1), "display": True} for m in _DISPLAY.finditer(markdown)]
    rest = _DISPLAY.sub("", markdown)
    spans += [{"tex": m.group(1), "display": False} for m in _INLINE.finditer(rest)]
    return spans


@pytest.fixture(scope="session")
def katex():
    node = shutil.which("node")
    if not node or not (KATEX_DIR / "node_modules" / "katex").is_dir():
        pytest.skip("KaTeX not installed (run: npm ci --prefix tests/katex)")

    def parse(markdown: str) -> list[tuple[str, str]]:
        spans = math_spans(markdown)
        assert spans, "no math found"
        out = subprocess.run([node, str(KATEX_DIR / "check.js")], input=json.dumps(spans),
                             capture_output=True, text=True, check=True, cwd=KATEX_DIR)
        return [(s["tex"], err) for s, err in zip(spans, json.loads(out.stdout)) if err]

    return parse


# --- TeX Live --------------------------------------------------------------

@pytest.fixture(scope="session")
def latex():
    def compile_(tex: str, engine: str, workdir: Path) -> Path:
        if not shutil.which(engine):
            pytest.skip(f"{engine} not installed (TeX Live)")
        src = workdir / "doc.tex"
        src.write_text(tex, encoding="utf-8")
        # \tracinglostchars=2 logs every glyph a font lacks, which we then fail on
        run = subprocess.run([engine, "-interaction=nonstopmode", "-halt-on-error", "-jobname=doc",
                              r"\tracinglostchars=2\relax\input{doc.tex}"],
                             cwd=workdir, capture_output=True, text=True, errors="replace", timeout=300)
        log = (workdir / "doc.log").read_text(encoding="utf-8", errors="replace")
        assert run.returncode == 0, f"{engine} failed:\n" + "\n".join(log.splitlines()[-40:])
        missing = [line for line in log.splitlines() if "Missing character" in line]
        assert not missing, f"{engine} dropped glyphs:\n" + "\n".join(missing)
        return workdir / "doc.pdf"

    return compile_
