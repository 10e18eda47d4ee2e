"""The documentation site builds strictly, and its generated pages show every command and every limit."""

from __future__ import annotations

import ast
import html
import importlib
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[docs]')")
pytest.importorskip("material", reason="mkdocs-material is not installed (pip install -e '.[docs]')")
_spec = importlib.util.spec_from_file_location("symattn_docs_hooks", ROOT / "docs" / "hooks.py")
hooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hooks)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def text_of(page: Path) -> str:
    """The visible text of a built page, tags dropped and entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


@pytest.mark.slow
def test_the_cli_page_lists_every_subcommand_of_the_parser(site):
    parser = getattr(importlib.import_module(hooks.CLI_MODULE), hooks.PARSER_FUNCTION)()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    names = list(action.choices)
    assert "verify-certificate" in names  # the README's synopsis once left it out
    page = (site / "cli" / "index.html").read_text(encoding="utf-8")
    headings = re.findall(r'<h2 id="symattn-([a-z-]+)"', page)
    assert headings == names
    text = text_of(site / "cli" / "index.html")
    for name, sub in action.choices.items():
        for option in (s for a in sub._actions for s in a.option_strings):
            assert option in text, (name, option)


@pytest.mark.slow
def test_the_limits_page_lists_every_constant_with_its_value(site):
    module = importlib.import_module(hooks.LIMITS_MODULE)
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    names = [
        node.targets[0].id
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id.isupper()
    ]
    assert "LATEX_SECONDS" in names and len(names) > 30
    rows = dict(
        re.findall(
            r"<td><code>([A-Z_]+)</code></td>\s*<td[^>]*>([^<]+)</td>",
            (site / "limits" / "index.html").read_text(encoding="utf-8"),
        )
    )
    assert sorted(rows) == sorted(names)
    for name in names:
        value = getattr(module, name)
        expected = f"{value:,}" if isinstance(value, int) else repr(value)
        assert rows[name].split(" (")[0] == expected, name
    assert rows["FILE_BYTES"] == "4,194,304 (4 MiB)"


@pytest.mark.slow
def test_the_examples_are_symattns_own_output(site):
    text = text_of(site / "student" / "index.html")
    assert "Fix first: scaled S/√d_k (it, cat) is given as 0.650 but should be 0.651" in text
    assert r"Q_{\text{它}}\cdot K_{\text{小猫}} &= 0.9\times 1.0 + 0.1\times 0.2 = 0.92" in text_of(
        site / "getting-started" / "index.html"
    )
    assert "<!-- symattn:" not in "".join(p.read_text(encoding="utf-8") for p in site.rglob("*.html"))
    if shutil.which("latexmk") and shutil.which("pdflatex") and shutil.which("pdftoppm"):
        png = (site / "generated" / "seed-en.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
