"""The documentation site builds strictly, and its generated pages show every command and every limit."""

from __future__ import annotations

import ast
import html
import importlib
import importlib.util
import os
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
def build(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """One strict build for the module: it makes every generated piece again (docs/hooks.py) and stops on a
    page whose blocks differ, so the blocks are checked here and not made a second time."""
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        # mkdocs' banner about its next major version would fill the tail shown when the build fails
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return out, done


@pytest.fixture
def site(build) -> Path:
    out, done = build
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
    for part in hooks.part_limit_modules():  # each variant's own limits: its module's "limits" sections
        names += [
            name for title, _, rows in hooks._module_sections(part) if title.startswith("limits") for name, *_ in rows
        ]
    rows = dict(
        re.findall(
            r"<td><code>([A-Z_]+)</code></td>\s*<td[^>]*>([^<]+)</td>",
            (site / "limits" / "index.html").read_text(encoding="utf-8"),
        )
    )
    assert sorted(rows) == sorted(names)
    values = {name: value for _, _, rows in hooks.limits_sections() for name, value, *_ in rows}
    for name in names:
        value = values[name]
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


# --- the pages as stored: whole, and current --------------------------------------------------------------

DOCS = ROOT / "docs"
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


def cells(line: str) -> int:
    """The columns of a Markdown table row (escaped pipes are text)."""
    return len(re.split(r"(?<!\\)\|", line.strip().strip("|")))


def split_tables(text: str) -> list[int]:
    """The 1-based lines where a table goes on after one blank line, with as many columns: a table split in
    two, whose second half a Markdown reader shows as raw | … | text."""
    lines, found, fenced = text.splitlines(), [], None
    for i, line in enumerate(lines):
        m = FENCE.match(line)
        if m:
            fenced = None if fenced and m.group(1).startswith(fenced) else fenced or m.group(1)[:3]
        if fenced or i < 2:
            continue
        above, gap = lines[i - 2], lines[i - 1]
        if line.startswith("|") and not gap.strip() and above.startswith("|") and cells(line) == cells(above):
            found.append(i + 1)
    return found


def test_the_table_checker_finds_a_split_table():
    table = "| a | b |\n|---|---|\n| 1 | 2 |\n"
    assert split_tables(table + "\n| 3 | 4 |\n") == [5]
    assert split_tables(table + "\n| 3 | 4 | 5 |\n") == []  # another table
    assert split_tables("```\n" + table + "\n| 3 | 4 |\n```\n") == []  # in a code block


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")))
def test_no_page_has_a_split_table_or_a_bare_placeholder(page):
    text = (DOCS / page).read_text(encoding="utf-8")
    assert split_tables(text) == []
    found = hooks.blocks.blocks(text)
    assert [name for name, _, _, body in found if not body] == []  # every marker holds its piece
    assert len(found) == text.count("<!-- symattn:")


def test_spec_md_has_one_claims_table_and_one_compute_paragraph():
    text = (DOCS / "spec.md").read_text(encoding="utf-8")
    assert text.count("| `scores`, `scaled` |") == 1
    assert text.count("`symattn compute` prints JSON with every intermediate") == 1
    assert text.count("(cross-attention)") == 1


@pytest.mark.slow
def test_every_generated_block_is_current(build):
    """As cog --check: each page's blocks are what symattn makes now (python docs/hooks.py --write), and
    every picture is committed. The strict build made every piece and compared each page's blocks."""
    _, done = build
    assert "generated blocks out of date" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 0, done.stderr[-3000:]
    assert "pieces made by running symattn" in done.stderr  # the hook ran: the blocks were compared
    assert hooks.missing_pictures() == []


def test_blocks_fill_and_find_what_is_stale():
    page = "# T\n\n<!-- symattn: a -->\n\nold\n\n<!-- end symattn: a -->\n\ntext\n\n<!-- symattn: b -->\n"
    assert hooks.blocks.stale(page, {"a": "new", "b": "B"}) == ["a", "b"]
    filled = hooks.blocks.filled(page, {"a": "new", "b": "B"})
    assert filled == (
        "# T\n\n<!-- symattn: a -->\n\nnew\n\n<!-- end symattn: a -->\n\ntext\n\n"
        "<!-- symattn: b -->\n\nB\n\n<!-- end symattn: b -->\n"
    )
    assert hooks.blocks.stale(filled, {"a": "new", "b": "B"}) == []
    assert hooks.blocks.unmarked(filled) == "# T\n\n\n\nnew\n\n\n\ntext\n\n\n\nB\n\n\n"


def test_the_package_map_reads_every_form_of_import(tmp_path):
    tree = ast.parse(
        "from symattn import variants, __version__\nfrom symattn.input.spec import Spec\n"
        "from . import steps\nfrom .modern import Groups\nimport symattn.exact.num\nimport json\n"
    )
    assert hooks._imports(tree, "symattn.derivation.derive", False) == {
        "symattn.variants",
        "symattn.__version__",
        "symattn.input.spec.Spec",
        "symattn.derivation.steps",
        "symattn.derivation.modern.Groups",
        "symattn.exact.num",
    }
    # derivation/steps.py reads the registry by `from symattn import variants`: the map names it
    row = next(line for line in hooks.package_map(tmp_path).splitlines() if line.startswith("| `steps` |"))
    assert "`variants`" in row.rsplit("|", 2)[1]


def test_every_python_name_the_docs_give_imports():
    # docs/author.md named symattn.pdf.latex_to_pdf and symattn.html.page, which no module holds
    docs = ROOT / "docs"
    named = {m for page in docs.glob("*.md") for m in re.findall(r"`(symattn(?:\.\w+)+)", page.read_text("utf-8"))}
    missing = []
    for name in sorted(named):
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):  # the longest importable module, then its attributes
            try:
                found: object = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            try:
                for attribute in parts[cut:]:
                    found = getattr(found, attribute)
            except AttributeError:
                missing.append(name)
            break
        else:
            missing.append(name)
    assert len(named) > 30 and missing == []
