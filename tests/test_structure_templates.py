"""The templates' shape (issue 29): a step kind has one body for every format, with a thin per-format child
only where the format differs beyond its math delimiters, which the |display filter writes."""

import re
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


def changed_lines(a: str, b: str) -> int:
    """The lines `diff a b` marks with < or >: those outside a longest common subsequence of lines (a minimal
    diff; GNU diff's may mark a few more in long files, never fewer)."""
    x, y = a.splitlines(), b.splitlines()
    common = [0] * (len(y) + 1)
    for line in x:
        previous = 0  # the diagonal: common[j - 1] of the row before
        for j, other in enumerate(y, 1):
            previous, common[j] = common[j], previous + 1 if line == other else max(common[j], common[j - 1])
    return len(x) + len(y) - 2 * common[-1]


def without_display_delimiters(text: str) -> str:
    return re.sub(r"\\\[|\\\]|\$\$", "DISPLAY", text)


def test_changed_lines_counts_as_diff_does():
    latex = "((( t('x') )))\n\\[\nM = 1\n\\]\n"
    assert changed_lines(latex, "((( t('x') )))\n\n$$\nM = 1\n$$\n") == 5  # 2 lines out, 3 in
    assert changed_lines(latex, latex) == 0
    assert changed_lines("a\nb\nc\n", "b\nc\nd\n") == 2


def test_at_most_five_latex_markdown_pairs_differ_in_five_lines_or_fewer():
    pairs = {
        p.name.removesuffix(".latex.j2"): changed_lines(
            p.read_text(encoding="utf-8"), p.with_name(p.name.replace(".latex.", ".markdown.")).read_text("utf-8")
        )
        for p in sorted(TEMPLATES.glob("*.latex.j2"))
        if p.with_name(p.name.replace(".latex.", ".markdown.")).is_file()
    }
    close = {name: n for name, n in pairs.items() if n <= 5}
    assert len(close) <= 5, close


def test_no_two_templates_differ_only_in_their_math_delimiters():
    seen: dict[str, str] = {}
    twins = []
    for p in sorted(TEMPLATES.glob("*.j2")):
        key = without_display_delimiters(p.read_text(encoding="utf-8"))
        if key in seen:
            twins.append((seen[key], p.name))
        seen.setdefault(key, p.name)
    assert twins == []


def test_delimiters_alone_make_twins():
    assert (
        without_display_delimiters("\\[\nx\n\\]\n")
        == without_display_delimiters("$$\nx\n$$\n")
        == "DISPLAY\nx\nDISPLAY\n"
    )


def test_every_step_kind_has_one_body_that_its_children_extend():
    from symattn.derivation.steps import STEP_KINDS

    for kind in STEP_KINDS + ("document",):
        assert (TEMPLATES / f"{kind}.j2").is_file(), kind
        for child in TEMPLATES.glob(f"{kind}.*.j2"):
            assert child.read_text(encoding="utf-8").count(f"((* extends '{kind}.j2' *))") == 1, child.name
