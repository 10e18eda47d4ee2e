"""Token labels and titles in the scripts a class uses: what is refused, how each is escaped, set and read back.

The clients are real: KaTeX parses the Markdown, xelatex or pdflatex compiles the
standalone LaTeX (no missing glyph, no overfull box over 1 pt), pdftotext reads
the labels back from the PDF, and Chromium lays out the right-to-left runs.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import unicodedata
from fractions import Fraction
from pathlib import Path

import pytest

from symattn.cli.commands import main
from symattn.derivation.derive import derive
from symattn.input import scripts
from symattn.input.errors import RenderError, SpecError
from symattn.input.spec import load_spec
from symattn.rendering.escape import escape_katex_text, escape_latex, escape_markdown
from symattn.rendering.layout import tex_width
from symattn.rendering.pdf import choose_engine
from symattn.rendering.renderer import render

from .conftest import chromium_driver

MATRICES = {"Q": [[1, 0], [0, 1], [1, 1]], "K": [[1, 0], [0, 1], [1, 1]], "V": [[1, 2], [3, 4], [5, 6]]}

# (labels, title, the engine chosen); each label as pdftotext gives it back
CASES = {
    "vietnamese": (["người", "phở", "ăn"], None, "xelatex"),
    "korean": (["고양이", "가", "먹는다"], None, "xelatex"),
    "russian": (["кошка", "ест", "рыбу"], None, "xelatex"),
    "greek": (["γάτα", "τρώει", "ψάρι"], None, "xelatex"),
    "spanish": (["¿qué?", "¡sí!", "año"], None, "pdflatex"),
    "hindi": (["बिल्ली", "मछली", "खाती"], None, "xelatex"),
    "arabic": (["قطة", "تأكل", "سمكة"], None, "xelatex"),
    "hebrew": (["חתול", "אוכל", "דג"], None, "xelatex"),
    "japanese": (["ねこ", "コーヒー", "猫"], None, "xelatex"),
    "cyrillic-title": (["cat", "eats", "fish"], "Внимание: кошка ест рыбу", "xelatex"),
    "english": (["cat", "eats", "fish"], "Attention", "pdflatex"),
}
# pdftotext gives Arabic in its contextual forms (presentation forms, in logical order); NFKC folds them back
ARABIC_IN_PDF = {"قطة": "\ufed7\ufec4\ufe94", "تأكل": "\ufe97\ufe84\ufedb\ufede", "سمكة": "\ufeb3\ufee4\ufedc\ufe94"}
# …inside the marks U+202B … U+202C that it puts around a right-to-left run of a left-to-right line


def spec_of(case: str, lang: str = "en"):
    labels, title, _ = CASES[case]
    data = {"lang": lang, "tokens": labels, **MATRICES}
    if title:
        data["title"] = title
    return load_spec(data)


# --- which characters: the whitelist and its messages ---------------------------------------

WHY = {
    "control": "is a control character or a line break; labels and titles are one line of text",
    "bidi": "is a bidirectional control; right-to-left text is ordered without it",
    "invisible": "is invisible and would make two labels look alike",
    "joiner": "is invisible here; it may stand only between two letters of an Indic or Arabic script",
    "unassigned": "is not an assigned Unicode character",
    "private": "is a private-use character",
    "space": "is a space other than U+0020 and would make two labels look alike",
    "mark": "is a combining mark with no letter before it",
    "font": "has no glyph in symattn's PDF fonts (Latin Modern, Noto, Fandol)",
    "bracket": "is a math bracket that KaTeX does not set in text",
}
REFUSED = [
    ("a\tb", "'\\t' (U+0009)", "control"),
    ("a\u2029b", "'\\u2029' (U+2029 PARAGRAPH SEPARATOR)", "control"),
    ("a\u200fb", "'\\u200f' (U+200F RIGHT-TO-LEFT MARK)", "bidi"),
    ("قطة\u200e", "'\\u200e' (U+200E LEFT-TO-RIGHT MARK)", "bidi"),
    ("a\u2067b\u2069", "'\\u2067' (U+2067 RIGHT-TO-LEFT ISOLATE)", "bidi"),
    ("\u061cقطة", "'\\u061c' (U+061C ARABIC LETTER MARK)", "bidi"),
    ("a\u202ab", "'\\u202a' (U+202A LEFT-TO-RIGHT EMBEDDING)", "bidi"),
    ("a\u2060b", "'\\u2060' (U+2060 WORD JOINER)", "invisible"),
    ("\ufeffab", "'\\ufeff' (U+FEFF ZERO WIDTH NO-BREAK SPACE)", "invisible"),
    ("co\u00adop", "'\\xad' (U+00AD SOFT HYPHEN)", "invisible"),
    ("a\ufe0f", "'\\ufe0f' (U+FE0F VARIATION SELECTOR-16)", "invisible"),
    ("\u3164", "'\u3164' (U+3164 HANGUL FILLER)", "invisible"),
    ("a\u200db", "'\\u200d' (U+200D ZERO WIDTH JOINER)", "joiner"),
    ("क\u200c", "'\\u200c' (U+200C ZERO WIDTH NON-JOINER)", "joiner"),
    ("क\u200cب", "'\\u200c' (U+200C ZERO WIDTH NON-JOINER)", "joiner"),
    ("a\u0378", "'\\u0378' (U+0378)", "unassigned"),
    ("a\ue000", "'\\ue000' (U+E000)", "private"),
    ("a\u00a0b", "'\\xa0' (U+00A0 NO-BREAK SPACE)", "space"),
    ("小\u3000猫", "'\\u3000' (U+3000 IDEOGRAPHIC SPACE)", "space"),
    ("\u0301a", "'\\u0301' (U+0301 COMBINING ACUTE ACCENT)", "mark"),
    ("a \u0301", "'\\u0301' (U+0301 COMBINING ACUTE ACCENT)", "mark"),
    ("\u093fक", "'\\u093f' (U+093F DEVANAGARI VOWEL SIGN I)", "mark"),
    ("😀", "'😀' (U+1F600 GRINNING FACE)", "font"),
    ("ཀ", "'ཀ' (U+0F40 TIBETAN LETTER KA)", "font"),
    ("Ϣ", "'Ϣ' (U+03E2 COPTIC CAPITAL LETTER SHEI)", "font"),
    ("ก\u0301", "'\\u0301' (U+0301 COMBINING ACUTE ACCENT)", "font"),
    ("★", "'★' (U+2605 BLACK STAR)", "font"),
    ("𠮷", "'𠮷' (U+20BB7 CJK UNIFIED IDEOGRAPH-20BB7)", "font"),
    ("⟦x⟧", "'⟦' (U+27E6 MATHEMATICAL LEFT WHITE SQUARE BRACKET)", "bracket"),
]


@pytest.mark.parametrize("label, character, why", REFUSED)
def test_refused_labels_name_the_character_and_why(label, character, why):
    with pytest.raises(SpecError) as err:
        load_spec({"tokens": [label, "x", "y"], **MATRICES})
    assert str(err.value) == f"<dict>: tokens[1]: the character {character} {WHY[why]}"


@pytest.mark.parametrize("label, character, why", REFUSED[::4])
def test_refusals_exit_2_on_one_line(tmp_path, capsys, label, character, why):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"lang": "en", "title": f"T {label}", **MATRICES}), encoding="utf-8")
    assert main(["render", str(path)]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"symattn: {path}: title: the character {character} {WHY[why]}\n")


ACCEPTED = [
    "người",
    "¿qué?",
    "ĸŉ",
    "q\u0303",  # a letter and a mark with no precomposed form
    "می\u200cخواهم",  # Persian: ZWNJ between two Arabic letters
    "क्\u200dष",  # Devanagari: ZWJ after a virama
    "ਬਿੱਲੀ",
    "பூனை",
    "แมว",
    "ድመት",
    "კატა",
    "կատու",
    "貓",
    "コーヒー",
    "a×b ≈ c",
    "€5 – 10‰",
]


@pytest.mark.parametrize("label", ACCEPTED)
def test_accepted_labels(label):
    assert load_spec({"tokens": [label, "x", "y"], **MATRICES}).tokens[0] == label


def test_labels_are_read_in_nfc_so_duplicates_are_caught():
    decomposed = unicodedata.normalize("NFD", "người")
    assert decomposed != "người"
    spec = load_spec({"tokens": [decomposed, "phở", "ăn"], "focus": unicodedata.normalize("NFD", "phở"), **MATRICES})
    assert spec.tokens == ("người", "phở", "ăn")
    assert spec.focus == 1
    with pytest.raises(SpecError) as err:
        load_spec({"tokens": ["người", "x", decomposed], **MATRICES})
    assert str(err.value) == "<dict>: tokens[3]: duplicate label 'người' (also tokens[1])"
    title = load_spec({"title": unicodedata.normalize("NFD", "Tiếng Việt"), **MATRICES}).document.title
    assert title == "Tiếng Việt"


# --- runs, escapes and widths ---------------------------------------------------------------

RUNS = [
    ("cat", [(None, "cat")]),
    ("người phở", [(None, "người phở")]),
    ("ĸa b", [("latin", "ĸa b")]),
    ("q\u0303", [("latin", "q\u0303")]),
    ("кошка_2", [("cyrillic", "кошка"), (None, "_2")]),
    ("قطة سوداء", [("arabic", "قطة سوداء")]),
    ("a قطة b", [(None, "a "), ("arabic", "قطة"), (None, " b")]),
    ("قطة 2", [("arabic", "قطة"), (None, " 2")]),
    ("고양이 小猫", [("hangul", "고양이"), (None, " 小猫")]),
    ("コーヒー", [("japanese", "コーヒー")]),
    ("ねこ", [(None, "ねこ")]),
    ("貓", [("chinese", "貓")]),
    ("क्\u200dष", [("devanagari", "क्\u200dष")]),
]


@pytest.mark.parametrize("text, expected", RUNS)
def test_runs(text, expected):
    assert [(font.key if font else None, piece) for font, piece in scripts.runs(text)] == expected


ESCAPES = [
    ("a_b", "a\\_b", "a\\_b", "a\\_b"),
    ("고양이 & co", "\\symattnhangul{고양이} \\& co", "고양이 \\& co", "고양이 \\& co"),
    ("قطة_1", "\\symattnarabic{قطة}\\_1", "\u2067قطة\u2069\\_1", "قطة\\_1"),
    ("γάτα {x}", "\\symattngreek{γάτα} \\{x\\}", "γάτα \\{x\\}", "γάτα \\{x\\}"),
    ("người", "người", "người", "người"),
    ("a≈b", "a\\ensuremath{\\approx}b", "a≈b", "a≈b"),
]


@pytest.mark.parametrize("text, latex, markdown, katex", ESCAPES)
def test_escapes(text, latex, markdown, katex):
    assert (escape_latex(text), escape_markdown(text), escape_katex_text(text)) == (latex, markdown, katex)


def test_the_math_symbols_labels_may_hold_are_those_the_escaper_writes_as_math():
    from symattn.rendering import escape

    assert set(escape._LATEX_SYMBOLS) == scripts.MATH_SYMBOLS


def test_project_prose_needs_no_script_font():
    # phrases are escaped like labels: they must stay in the document's own fonts (no \symattn macro)
    from symattn.rendering.phrases import load_language

    def strings(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, dict):
            for value in node.values():
                yield from strings(value)
        elif isinstance(node, list):
            for value in node:
                yield from strings(value)

    for lang in ("en", "zh"):
        # but the practice round's words (σ, φ, θ_t) go only to the live page, whose fonts set every script
        document = {key: value for key, value in load_language(lang).items() if key != "practice"}
        wrapped = {s for s in strings(document) if any(f for f, _ in scripts.runs(s))}
        assert wrapped == set(), lang


@pytest.mark.parametrize(
    "text, width",
    [
        ("\\text{cat}", 14.4),
        ("\\text{\\symattnhangul{고양이}}", 31.5),
        ("\\text{小猫}", 21.0),
        ("\\text{\\symattngreek{γάτα}}", 22.8),
        ("\\text{\\symattntamil{பூனை}}", 34.0),
        ("\\text{\\symattndevanagari{बिल्ली}}", 26.0),  # the vowel signs ि and ी take room; the virama none
        ("\\text{\\symattnarabic{قطة}}", 15.6),
    ],
)
def test_text_widths_by_script(text, width):
    assert tex_width(text) == pytest.approx(width)


# --- the engine and the preamble ------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_engine_is_chosen_from_the_labels_and_named_in_the_header(case):
    tex = render(derive(spec_of(case)), "latex", standalone=True)
    engine = CASES[case][2]
    assert choose_engine(tex) == engine
    assert tex.splitlines()[0] == f"% !TEX program = {engine}"
    assert ("\\usepackage{fontspec}" in tex) == (case not in ("spanish", "english", "vietnamese"))


def test_engine_given_is_checked_against_the_text():
    korean = render(derive(spec_of("korean")), "latex", standalone=True)
    vietnamese = render(derive(spec_of("vietnamese")), "latex", standalone=True)
    chinese = render(derive(spec_of("english", "zh")), "latex", standalone=True)
    assert choose_engine(korean, engine="xelatex") == "xelatex"
    assert choose_engine(chinese, engine="lualatex") == "lualatex"
    assert choose_engine(vietnamese, engine="lualatex") == "lualatex"
    with pytest.raises(RenderError) as err:
        choose_engine(korean, engine="pdflatex")
    assert str(err.value) == "pdflatex cannot set '고' (U+ACE0 HANGUL SYLLABLE GO) in this document; use xelatex"
    with pytest.raises(RenderError) as err:
        choose_engine(vietnamese, engine="pdflatex")
    assert str(err.value) == (
        "pdflatex cannot set 'ư' (U+01B0 LATIN SMALL LETTER U WITH HORN) in this document; use xelatex"
    )
    with pytest.raises(RenderError) as err:
        choose_engine(korean, engine="lualatex")
    assert str(err.value) == "the document's Hangul text is set up for xelatex; use xelatex, not lualatex"


def test_preamble_defines_only_the_scripts_present():
    tex = render(derive(spec_of("arabic")), "latex", standalone=True)
    preamble = tex[: tex.index("\\begin{document}")]
    assert preamble.splitlines()[:7] == [
        "% !TEX program = xelatex",
        "\\documentclass[letterpaper]{article}",
        "\\usepackage{fontspec} % labels in other scripts: Noto fonts (fonts-noto-core, fonts-noto-cjk); "
        "compile with xelatex",
        "\\TeXXeTstate=1 % right-to-left runs: \\beginR ... \\endR",
        "\\newfontfamily\\symattnfontarabic{Noto Naskh Arabic}[Script=Arabic]",
        "\\newcommand\\symattnarabic[1]{{\\symattnfontarabic\\beginR #1\\endR}}",
        "\\usepackage{amsmath}",
    ]
    zh = render(
        derive(load_spec({"lang": "zh", "tokens": ["고양이", "बिल्ली", "猫"], **MATRICES})), "latex", standalone=True
    )
    assert [line for line in zh.splitlines() if "symattn" in line and "newcommand" in line] == [
        "\\newcommand\\symattndevanagari[1]{{\\symattnfontdevanagari\\XeTeXgenerateactualtext=1 #1}}",
        "\\newcommand\\symattnhangul[1]{{\\CJKfamily{symattnhangul}#1}}",  # xeCJK would set Hangul in Fandol
    ]


def test_a_fragment_provides_the_macros_as_plain_text():
    fragment = render(derive(spec_of("korean")), "latex")
    assert fragment.startswith("\\providecommand\\symattnhangul[1]{#1}\n\n\\section*{")
    assert render(derive(spec_of("english")), "latex").startswith("\\section*{")


# --- the clients ----------------------------------------------------------------------------


def pdf_text(pdf) -> str:
    if not shutil.which("pdftotext"):
        pytest.skip("pdftotext not installed (poppler-utils)")
    return subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout


def overfull(log: str) -> list[str]:
    """Overfull boxes over 1 pt, and any overfull vbox."""
    lines = re.findall(r"^Overfull \\([hv])box \((-?[\d.]+)pt too \w+\).*$", log, re.M)
    return [f"{kind}box {pt}pt" for kind, pt in lines if kind == "v" or float(pt) > 1.0]


@pytest.mark.client
@pytest.mark.parametrize("case", sorted(CASES))
def test_labels_in_every_client(katex, latex, tmp_path, case):
    spec = spec_of(case)
    assert katex(render(derive(spec), "markdown")) == []
    tex = render(derive(spec), "latex", standalone=True)
    pdf = latex(tex, choose_engine(tex), tmp_path)  # fails on any missing glyph
    assert overfull((tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")) == []
    text = unicodedata.normalize("NFC", pdf_text(pdf))
    labels, title, _ = CASES[case]
    for label in labels:
        assert ARABIC_IN_PDF.get(label, label) in text, label
        assert unicodedata.normalize("NFKC", ARABIC_IN_PDF.get(label, label)) == label
    if title:
        assert title in text


@pytest.mark.client
def test_every_script_in_one_document_in_both_languages(latex, tmp_path):
    samples = [
        "ɓɗ ĸ",
        "γάτα",
        "кошка",
        "կատու",
        "חתול",
        "قطة سوداء",
        "बिल्ली",
        "বিড়াল",
        "ਬਿੱਲੀ",
        "બિલાડી",
        "ବିଲେଇ",
        "பூனை",
        "పిల్లి",
        "ಬೆಕ್ಕು",
        "പൂച്ച",
        "පූසා",
        "แมว",
        "კატა",
        "ድመት",
        "고양이",
        "貓",
        "コーヒー",
        "小猫",
    ]
    assert {f.key for f in scripts.fonts_for(samples)} == {s.key for s in scripts.SCRIPTS if s.family} | {
        "chinese",
        "japanese",
    }
    n = len(samples)
    for lang in ("en", "zh"):
        spec = load_spec({"lang": lang, "tokens": samples, "Q": [[1]] * n, "K": [[1]] * n, "V": [[1]] * n})
        tex = render(derive(spec), "latex", standalone=True)
        folder = tmp_path / lang
        folder.mkdir()
        text = unicodedata.normalize("NFC", pdf_text(latex(tex, "xelatex", folder)))
        for sample in samples:
            if not scripts.script_of(sample[0]).rtl:  # right-to-left runs: see the Arabic case above
                assert unicodedata.normalize("NFC", sample) in text, sample


@pytest.mark.client
def test_font_coverage_matches_the_installed_fonts():
    # what scripts.py says each font sets, read again from the fonts fontconfig finds
    if not shutil.which("fc-match"):
        pytest.skip("fontconfig not installed")

    def charset(family: str, style: str) -> set[int]:
        out = subprocess.run(
            ["fc-match", "--format=%{charset}", f"{family}:style={style}"], capture_output=True, text=True, check=True
        ).stdout
        found = subprocess.run(["fc-match", "--format=%{family}", family], capture_output=True, text=True).stdout
        if family not in found.split(","):
            pytest.skip(f"{family} not installed (fonts-noto-core, fonts-noto-cjk)")
        return {c for lo, hi in scripts._ranges(out) for c in range(lo, hi + 1)}

    for script in (*scripts.SCRIPTS, scripts.CHINESE, scripts.JAPANESE):
        if script.family is None:
            continue
        has = charset(script.family, "Regular") & charset(script.family, "Bold")
        claimed = {c for lo, hi in script.covered for c in range(lo, hi + 1)}
        assert claimed - has == set(), script.key


RTL_ORDER = """
const [text, first, last] = arguments;
const walker = document.createTreeWalker(document.querySelector('p'), NodeFilter.SHOW_TEXT);
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  const at = node.data.indexOf(text);
  if (at < 0) continue;
  const box = (i) => { const r = document.createRange(); r.setStart(node, at + i); r.setEnd(node, at + i + 1);
                       return r.getBoundingClientRect().left; };
  return [box(first), box(last)];
}
return null;
"""


@pytest.fixture(scope="module")
def chrome():
    driver = chromium_driver()
    try:
        yield driver
    finally:
        driver.quit()


def open_page(driver, path, spec) -> dict:
    from symattn.rendering.html import derivation_page

    path.write_text(derivation_page(derive(spec)), encoding="utf-8")
    driver.get(path.as_uri())
    driver.execute_async_script("const done = arguments[0]; document.fonts.ready.then(() => done());")
    return driver.execute_script(
        "const math = document.querySelectorAll('span.math, div.math');"
        "return {math: math.length, errors: document.querySelectorAll('.katex-error').length,"
        " typeset: Array.from(math).filter(el => el.querySelector('.katex')).length};"
    )


@pytest.mark.client
@pytest.mark.parametrize("case", sorted(CASES))
def test_html_has_no_katex_error_in_chromium(chrome, tmp_path, case):
    state = open_page(chrome, tmp_path / "page.html", spec_of(case))
    assert state["math"] > 0 and state["typeset"] == state["math"] and state["errors"] == 0


@pytest.mark.client
def test_html_sets_right_to_left_runs_in_chromium(chrome, tmp_path):
    spec = load_spec({"lang": "en", "tokens": ["قطة سوداء", "חתול", "고양이"], **MATRICES})
    assert open_page(chrome, tmp_path / "page.html", spec)["errors"] == 0
    sentence = chrome.execute_script("return document.querySelector('p').innerText")
    assert "“\u2067قطة سوداء\u2069 / \u2067חתול\u2069 / 고양이”" in sentence
    # each run reads right to left (its first letter is rightmost), and the labels stay in order
    arabic = chrome.execute_script(RTL_ORDER, "قطة سوداء", 0, 8)
    hebrew = chrome.execute_script(RTL_ORDER, "חתול", 0, 3)
    assert arabic[0] > arabic[1] and hebrew[0] > hebrew[1]
    assert max(arabic) < min(hebrew)


@pytest.mark.client
def test_report_sheet_key_and_gradebook_with_other_scripts(latex, tmp_path):
    from symattn.checking.checker import check
    from symattn.classroom import exercises as ex
    from symattn.classroom import sheets
    from symattn.classroom.gradebook import gradebook_text
    from symattn.classroom.grading import COUNTED, Gradebook, Row
    from symattn.rendering.renderer import render_report

    spec = load_spec({"lang": "en", "tokens": CASES["korean"][0], "title": "Ελληνικά καὶ العربية", **MATRICES})
    report = check(spec, {"claims": {"sqrt_dk": "1.414", "scores": [["1", "0", "1"]] * 3}})
    template = tmp_path / "homework.toml"
    template.write_text(
        'title = "Bài tập: attention"\nlang = "en"\ntokens = ["고양이", "قطة", "बिल्ली"]\nfocus = 3\n'
        'ask = ["weights"]\n[vary]\nd_k = 2\nd_v = 2\nQ = { range = [-1, 1], step = 0.1, nonzero = true }\n'
        "K = { range = [-1, 1], step = 0.1, nonzero = true }\nV = { range = [0, 10], step = 1 }\n",
        encoding="utf-8",
    )
    variants = ex.exercise(template, [("s01", "Nguyễn Văn An"), ("s02", "김민수")], 1)
    counts = tuple((name, 0) for name in COUNTED)
    # s02's first thing to fix is a score between Korean tokens: the gradebook names it, in its script's font
    first = report.first_problem
    assert (first.row_label, first.col_label) == (CASES["korean"][0][1], CASES["korean"][0][0])
    book = Gradebook(
        tuple(
            Row(i, name, f"{i}.toml", counts, Fraction(1), 1, fix, report=mine)
            for i, name, fix, mine in (("s01", "Đặng Thu", None, None), ("s02", "فاطمة", first.claim.key, report))
        )
    )
    documents = {  # each with what its PDF text must show
        "report": (render_report(report, "latex", standalone=True), ["Ελληνικά καὶ", "고양이", "먹는다"]),
        "sheet": (sheets.sheet(variants[0], "latex"), ["Bài tập", "고양이", "बिल्ली", "Nguyễn Văn An"]),
        "key-all": (sheets.key_all(variants, "latex"), ["Nguyễn Văn An", "김민수", "बिल्ली"]),
        "gradebook": (  # فاطمة, and the place of her first thing to fix
            gradebook_text(book, "latex", "en"),
            ["Đặng Thu", "\ufed3\ufe8e\ufec3\ufee4\ufe94", f"{CASES['korean'][0][1]}, {CASES['korean'][0][0]}"],
        ),
    }
    for name, (tex, shown) in documents.items():
        folder = tmp_path / name
        folder.mkdir()
        assert choose_engine(tex) == "xelatex", name
        text = unicodedata.normalize("NFC", pdf_text(latex(tex, "xelatex", folder)))
        for word in shown:
            assert word in text, (name, word)


def test_roster_names_are_read_like_labels(tmp_path, capsys):
    from symattn.classroom.exercises import read_roster

    roster = tmp_path / "roster.csv"
    roster.write_text("id,name\ns01," + unicodedata.normalize("NFD", "Nguyễn Văn An") + "\ns02,\n", encoding="utf-8")
    assert read_roster(roster) == [("s01", "Nguyễn Văn An"), ("s02", "")]
    roster.write_text("id,name\ns01,Ann\ns02,Bo 😀\n", encoding="utf-8")
    homework = Path(__file__).resolve().parent.parent / "examples" / "homework.toml"
    assert main(["exercise", str(homework), "--roster", str(roster), "-o", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"symattn: {roster}: name[3]: the character '😀' (U+1F600 GRINNING FACE) {WHY['font']}\n"
    )


def test_install_hint_names_the_fonts():
    from symattn.rendering.pdf import install_hint

    assert install_hint("xelatex", False, True) == (
        "latexmk and xelatex are needed for PDF output; install them with: apt-get install latexmk texlive-xetex "
        "texlive-latex-recommended texlive-pictures fonts-noto-core fonts-noto-cjk"
    )


@pytest.mark.client
def test_a_missing_font_is_one_line_naming_the_packages():
    from symattn.rendering.pdf import latex_to_pdf

    if not (shutil.which("latexmk") and shutil.which("xelatex")):
        pytest.skip("latexmk and xelatex not installed (TeX Live)")
    tex = "\\documentclass{article}\\usepackage{fontspec}\\newfontfamily\\x{No Such Serif}\\begin{document}x\\end{document}"
    with pytest.raises(RenderError) as err:
        latex_to_pdf(tex, engine="xelatex")
    assert re.fullmatch(
        r'xelatex failed: ! Package fontspec Error: The font "No Such Serif" cannot be found\.; install '
        r"fonts-noto-core and fonts-noto-cjk \(the log is kept at \S+\.log\)",
        str(err.value),
    )


@pytest.mark.client
def test_render_pdf_through_the_cli_picks_xelatex(tmp_path, capsys):
    if not (shutil.which("latexmk") and shutil.which("xelatex")):
        pytest.skip("latexmk and xelatex not installed (TeX Live)")
    spec = tmp_path / "korean.json"
    spec.write_text(json.dumps({"lang": "en", "tokens": ["고양이", "قطة", "बिल्ली"], **MATRICES}), encoding="utf-8")
    target = tmp_path / "korean.pdf"
    assert main(["render", str(spec), "-o", str(target)]) == 0
    assert capsys.readouterr().err == ""
    text = pdf_text(target)
    assert "고양이" in text and ARABIC_IN_PDF["قطة"] in text and "बिल्ली" in text
    assert main(["render", str(spec), "--engine", "pdflatex", "-o", str(tmp_path / "x.pdf")]) == 2
    assert capsys.readouterr().err == (
        "symattn: pdflatex cannot set '고' (U+ACE0 HANGUL SYLLABLE GO) in this document; use xelatex\n"
    )
