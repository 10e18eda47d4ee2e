"""The scripts a label or title may be written in, the font that sets each in PDF, and its runs of text.

Every character belongs to one script by its Unicode block (Latin, Greek,
Hangul, Devanagari, …) or to none (digits, punctuation, spaces: "common").
A script is allowed where an installed font sets it: each one below names its
font (Debian's ``fonts-noto-core`` and ``fonts-noto-cjk``, Latin Modern,
ctex's Fandol) and the characters that font has, read once with
``fc-query --format='%{charset}'`` from the regular and the bold face
(headings are bold). The escaper splits text into runs and puts each run
that needs its own font in a macro ``\\symattn<key>{…}`` that the standalone
preamble defines for the scripts present only. Right-to-left runs are set
with XeTeX's ``\\beginR … \\endR`` and isolated (RLI … PDI) in Markdown.
"""

from __future__ import annotations

import bisect
import re
from functools import cache, lru_cache

from symattn.input.records import record

Ranges = tuple[tuple[int, int], ...]


def _ranges(text: str) -> Ranges:
    """fc-query's charset notation (``20-7e a0 …``, hexadecimal) as (first, last) pairs."""
    out = []
    for part in text.split():
        first, _, last = part.partition("-")
        out.append((int(first, 16), int(last or first, 16)))
    return tuple(out)


def _within(code: int, ranges: Ranges) -> bool:
    i = bisect.bisect_right(ranges, (code, 0x10FFFF)) - 1
    return i >= 0 and ranges[i][0] <= code <= ranges[i][1]


@record
class Script:
    """One writing system, as the PDF sets it."""

    key: str  # the macro \symattn<key>, and the script's name in messages
    name: str
    blocks: Ranges  # the Unicode blocks that belong to it
    covered: Ranges  # what its font sets, within the blocks
    family: str | None = None  # fontspec family of its own font; None: the document's own fonts
    options: str = ""  # fontspec options
    rtl: bool = False
    joiners: bool = False  # ZWJ and ZWNJ may stand between its letters
    actual_text: bool = False  # the PDF keeps the typed text (pdftotext reads Indic vowels in order)
    cjk: bool = False  # set through xeCJK (ctex) when it is loaded


# --- Latin, set in Latin Modern (the document's font) or, beyond it, in Noto Serif ---------------
_LATIN_BLOCKS = _ranges("0-2ff 1d00-1dbf 1e00-1eff 2c60-2c7f a720-a7ff ab30-ab6f fb00-fb06")
_NOTO_SERIF_LATIN = _ranges(
    "41-5a 61-7a aa b5 ba c0-d6 d8-f6 f8-2ff 1d00-1dbf 1e00-1eff 2c60-2c7f a720-a7bf a7c2-a7ca a7f5-a7ff "
    "ab30-ab6b fb00-fb06"
)
# combining marks (Unicode's "inherited" script): they take the script of the letter before them
_MARK_BLOCKS = _ranges("300-36f 1ab0-1aff 1dc0-1dff 20d0-20ff fe20-fe2f")
_NOTO_SERIF_MARKS = _ranges("300-36f 1ab0-1ac0 1dc0-1df9 1dfb-1dff 20f0 fe20-fe2f")
# lmroman (every size, regular and bold): Latin letters and marks, and the common characters
_LATIN_MODERN = _ranges(
    "20-7e a0-137 139-148 14a-165 168-17f 18e 192 1a0-1a1 1af-1b0 1cd-1d4 1d7-1dd 1e6-1e7 1ea-1eb 1f0 "
    "1f4-1f5 1fa-201 204-205 208-209 20c-20d 210-211 214-215 218-21b 237 258-259 2be-2bf 2c6-2c7 2d8-2dd "
    "300-304 306-30c 30f 311 323 326 32e-332 e3f 1e0c-1e0f 1e24-1e27 1e2a-1e2b 1e2e-1e2f 1e36-1e39 "
    "1e42-1e47 1e58-1e5d 1e62-1e63 1e6c-1e6f 1e80-1e85 1e92-1e93 1e97 1ea0-1ef9 2010-2011 2013-2014 2016 "
    "2018-201a 201c-201e 2020-2022 2026 2030-2031 2039-203b 203d 203f-2040 2044-2046 2052 2054 20a1 20a4 "
    "20a6 20a9 20ab-20ac 20b1 2103 2116-2117 211e 2120 2122 2126-2127 212e 2190-2193 2212 2215 2217 221a "
    "221e 2222 2300 2422-2423 25e6 266a 26ad-26ae 27e6-27e7 fb00-fb04"
)
# symbols the LaTeX escaper writes as math (escape._LATEX_SYMBOLS), so every engine sets them
MATH_SYMBOLS = frozenset("≈→←×·−√∞")

LATIN = Script("latin", "Latin", _LATIN_BLOCKS, _NOTO_SERIF_LATIN, "Noto Serif", "Ligatures=TeX")

_GREEK_COVERED = (
    "370-377 37a-37f 384-38a 38c 38e-3a1 3a3-3e1 3f0-3ff 1f00-1f15 1f18-1f1d 1f20-1f45 1f48-1f4d 1f50-1f57 "
    "1f59 1f5b 1f5d 1f5f-1f7d 1f80-1fb4 1fb6-1fc4 1fc6-1fd3 1fd6-1fdb 1fdd-1fef 1ff2-1ff4 1ff6-1ffe"
)
_ARABIC_COVERED = (
    "606-61b 61e-6dc 6de-6ff 750-77f 8a0 8a2-8ac 8e4-8fe fb50-fbc1 fbd3-fd3f fd50-fd8f fd92-fdc7 fdf0-fdfd "
    "fe70-fe74 fe76-fefc"
)
_ETHIOPIC_COVERED = (
    "1200-1248 124a-124d 1250-1256 1258 125a-125d 1260-1288 128a-128d 1290-12b0 12b2-12b5 12b8-12be 12c0 "
    "12c2-12c5 12c8-12d6 12d8-1310 1312-1315 1318-135a 135d-137c 1380-1399 2d80-2d96 2da0-2da6 2da8-2dae "
    "2db0-2db6 2db8-2dbe 2dc0-2dc6 2dc8-2dce 2dd0-2dd6 2dd8-2dde ab01-ab06 ab09-ab0e ab11-ab16 ab20-ab26 "
    "ab28-ab2e"
)
_HANGUL_COVERED = "1100-11ff 3131-318e a960-a97c ac00-d7a3 d7b0-d7c6 d7cb-d7fb"  # Noto Serif CJK, every face
# ctex's CJK: punctuation, kana, Han (Extension A too) and full-width forms; Noto CJK lacks the newest Han
_CJK_COVERED = "3001-303f 3041-30ff 3400-4db5 4e00-9fea ff01-ff5e"


def _indic(key: str, name: str, blocks: str, covered: str, family: str) -> Script:
    return Script(
        key, name, _ranges(blocks), _ranges(covered), family, f"Script={name}", joiners=True, actual_text=True
    )


SCRIPTS: tuple[Script, ...] = (
    LATIN,
    Script("greek", "Greek", _ranges("370-3ff 1f00-1fff"), _ranges(_GREEK_COVERED), "Noto Serif", "Ligatures=TeX"),
    Script(
        "cyrillic",
        "Cyrillic",
        _ranges("400-52f 1c80-1c8f 2de0-2dff a640-a69f"),
        _ranges("400-52f 1c80-1c88 2de0-2dff a640-a69f"),
        "Noto Serif",
        "Ligatures=TeX",
    ),
    Script(
        "armenian",
        "Armenian",
        _ranges("530-58f fb13-fb17"),
        _ranges("531-556 559-58a 58d-58f fb13-fb17"),
        "Noto Serif Armenian",
    ),
    Script(
        "hebrew",
        "Hebrew",
        _ranges("590-5ff fb1d-fb4f"),
        _ranges("591-5c7 5d0-5ea 5f0-5f4 fb1d-fb36 fb38-fb3c fb3e fb40-fb41 fb43-fb44 fb46-fb4f"),
        "Noto Serif Hebrew",
        "Script=Hebrew",
        rtl=True,
    ),
    Script(
        "arabic",
        "Arabic",
        _ranges("600-6ff 750-77f 8a0-8ff fb50-fdff fe70-feff"),
        _ranges(_ARABIC_COVERED),
        "Noto Naskh Arabic",
        "Script=Arabic",
        rtl=True,
        joiners=True,
    ),
    _indic("devanagari", "Devanagari", "900-97f a8e0-a8ff", "900-97f a8e0-a8ff", "Noto Serif Devanagari"),
    _indic(
        "bengali",
        "Bengali",
        "980-9ff",
        "980-983 985-98c 98f-990 993-9a8 9aa-9b0 9b2 9b6-9b9 9bc-9c4 9c7-9c8 9cb-9ce 9d7 9dc-9dd 9df-9e3 9e6-9fe",
        "Noto Serif Bengali",
    ),
    _indic(
        "gurmukhi",
        "Gurmukhi",
        "a00-a7f",
        "a01-a03 a05-a0a a0f-a10 a13-a28 a2a-a30 a32-a33 a35-a36 a38-a39 a3c a3e-a42 a47-a48 a4b-a4d a51 a59-a5c "
        "a5e a66-a76",
        "Noto Serif Gurmukhi",
    ),
    _indic(
        "gujarati",
        "Gujarati",
        "a80-aff",
        "a81-a83 a85-a8d a8f-a91 a93-aa8 aaa-ab0 ab2-ab3 ab5-ab9 abc-ac5 ac7-ac9 acb-acd ad0 ae0-ae3 ae6-af1 af9-aff",
        "Noto Serif Gujarati",
    ),
    _indic(
        "oriya",
        "Oriya",
        "b00-b7f",
        "b01-b03 b05-b0c b0f-b10 b13-b28 b2a-b30 b32-b33 b35-b39 b3c-b44 b47-b48 b4b-b4d b56-b57 b5c-b5d b5f-b63 "
        "b66-b77",
        "Noto Sans Oriya",
    ),
    _indic(
        "tamil",
        "Tamil",
        "b80-bff",
        "b82-b83 b85-b8a b8e-b90 b92-b95 b99-b9a b9c b9e-b9f ba3-ba4 ba8-baa bae-bb9 bbe-bc2 bc6-bc8 bca-bcd bd0 "
        "bd7 be6-bfa",
        "Noto Serif Tamil",
    ),
    _indic(
        "telugu",
        "Telugu",
        "c00-c7f",
        "c00-c0c c0e-c10 c12-c28 c2a-c39 c3d-c44 c46-c48 c4a-c4d c55-c56 c58-c5a c60-c63 c66-c6f c77-c7f",
        "Noto Serif Telugu",
    ),
    _indic(
        "kannada",
        "Kannada",
        "c80-cff",
        "c80-c8c c8e-c90 c92-ca8 caa-cb3 cb5-cb9 cbc-cc4 cc6-cc8 cca-ccd cd5-cd6 cde ce0-ce3 ce6-cef cf1-cf2",
        "Noto Serif Kannada",
    ),
    _indic(
        "malayalam",
        "Malayalam",
        "d00-d7f",
        "d00-d0c d0e-d10 d12-d44 d46-d48 d4a-d4f d54-d63 d66-d7f",
        "Noto Serif Malayalam",
    ),
    _indic(
        "sinhala",
        "Sinhala",
        "d80-dff",
        "d81-d83 d85-d96 d9a-db1 db3-dbb dbd dc0-dc6 dca dcf-dd4 dd6 dd8-ddf de6-def df2-df4",
        "Noto Serif Sinhala",
    ),
    Script("thai", "Thai", _ranges("e00-e7f"), _ranges("e01-e3a e3f-e5b"), "Noto Serif Thai", "Script=Thai"),
    Script(
        "georgian",
        "Georgian",
        _ranges("10a0-10ff 1c90-1cbf 2d00-2d2f"),
        _ranges("10a0-10c5 10c7 10cd 10d0-10ff 1c90-1cba 1cbd-1cbf 2d00-2d25 2d27 2d2d"),
        "Noto Serif Georgian",
    ),
    Script(
        "ethiopic",
        "Ethiopic",
        _ranges("1200-139f 2d80-2ddf ab00-ab2f"),
        _ranges(_ETHIOPIC_COVERED),
        "Noto Serif Ethiopic",
    ),
    Script(
        "hangul",
        "Hangul",
        _ranges("1100-11ff 3130-318f a960-a97f ac00-d7ff"),
        _ranges(_HANGUL_COVERED),
        "Noto Serif CJK KR",
        cjk=True,
    ),
    # Chinese and Japanese: ctex's own fonts (Fandol, or the spec's cjk_font); a run with a character
    # beyond GB 2312, which Fandol lacks, is set in Noto Serif CJK (JP when it has kana, else SC)
    Script("cjk", "CJK", _ranges("3000-30ff 3400-4dbf 4e00-9fff ff00-ffef"), _ranges(_CJK_COVERED), cjk=True),
)
# the fonts of CJK runs beyond Fandol: not scripts of their own, only other fonts for CJK runs
CHINESE = Script("chinese", "CJK", (), (), "Noto Serif CJK SC", cjk=True)
JAPANESE = Script("japanese", "CJK", (), (), "Noto Serif CJK JP", cjk=True)
_BY_KEY = {s.key: s for s in (*SCRIPTS, CHINESE, JAPANESE)}
_BLOCKS = sorted((lo, hi, s) for s in SCRIPTS for lo, hi in s.blocks)
_BLOCK_STARTS = [lo for lo, _, _ in _BLOCKS]
_KANA = ((0x3041, 0x30FF),)


def is_mark(ch: str) -> bool:
    """A combining mark of the inherited script (U+0301 …), which takes the script of the letter before it."""
    return _within(ord(ch), _MARK_BLOCKS)


def script_of(ch: str) -> Script | None:
    """The script of a character by its block; None for common characters (digits, punctuation, spaces)."""
    code = ord(ch)
    i = bisect.bisect_right(_BLOCK_STARTS, code) - 1
    if i < 0 or code > _BLOCKS[i][1]:
        return None
    script = _BLOCKS[i][2]
    if script is LATIN and code < 0x100 and not ch.isalpha():
        return None  # ASCII and Latin-1 punctuation, digits and signs are common
    return script


def is_covered(ch: str, script: Script | None, after: Script | None = None) -> bool:
    """Whether the font of ``script`` (common: Latin Modern) sets ``ch``; a mark needs the script ``after``."""
    code = ord(ch)
    if is_mark(ch):
        return after in (LATIN, _BY_KEY["greek"], _BY_KEY["cyrillic"]) and _within(code, _NOTO_SERIF_MARKS)
    if script is None:
        return _within(code, _LATIN_MODERN) or ch in MATH_SYMBOLS
    return _within(code, script.covered)


def is_joiner(ch: str) -> bool:
    return ch in "\u200c\u200d"


# --- runs ---------------------------------------------------------------------------------------


def _scripts(text: str) -> list[Script | None]:
    """Each character's script: marks and joiners take the one before them."""
    out: list[Script | None] = []
    for ch in text:
        out.append(out[-1] if out and (is_mark(ch) or is_joiner(ch)) else script_of(ch))
    return out


def runs(text: str) -> tuple[tuple[Script | None, str], ...]:
    """``text`` in runs that each take one font: (the run's font, the run). None: the document's own font.

    A space between two characters of one script belongs to their run (so two
    Arabic words stay one right-to-left run); other common characters are set
    in the document's font. A Latin run stays in Latin Modern when it has every
    character; otherwise the whole run is set in Noto Serif, so that one word
    never mixes two fonts. A CJK run stays with ctex's font within GB 2312.
    """
    # the same labels and phrases are escaped again and again; a whole document is read once
    return _cached_runs(text) if len(text) <= 256 else _runs(text)


@lru_cache(maxsize=4096)
def _cached_runs(text: str) -> tuple[tuple[Script | None, str], ...]:
    return _runs(text)


def _runs(text: str) -> tuple[tuple[Script | None, str], ...]:
    if is_pdflatex_text(text):  # English, Latin-1: all in the document's own font
        return ((None, text),)
    scripts = _scripts(text)
    i = 0
    while i < len(text):  # spaces join the run around them
        j = i
        while j < len(text) and text[j] == " ":
            j += 1
        if j > i and 0 < i and j < len(text) and scripts[i - 1] is not None and scripts[i - 1] is scripts[j]:
            scripts[i:j] = [scripts[j]] * (j - i)
        i = j + 1 if j == i else j
    pieces: list[tuple[Script | None, str]] = []
    start = 0
    for i in range(1, len(text) + 1):
        if i == len(text) or scripts[i] is not scripts[start]:
            pieces.append((_font(scripts[start], text[start:i]), text[start:i]))
            start = i
    merged: list[tuple[Script | None, str]] = []
    for font, piece in pieces:
        if merged and merged[-1][0] is font:
            merged[-1] = (font, merged[-1][1] + piece)
        else:
            merged.append((font, piece))
    return tuple(merged)


def _font(script: Script | None, run: str) -> Script | None:
    """The font a run is set in: None for the document's own (Latin Modern, ctex's CJK font)."""
    if script is LATIN:
        # Latin Modern has no mark positioning: a run with a combining mark goes to Noto Serif
        return None if all(_within(ord(ch), _LATIN_MODERN) and not is_mark(ch) for ch in run) else LATIN
    if script is not None and script.key == "cjk":
        if all(_in_gb2312(ch) for ch in run):
            return None
        return JAPANESE if any(_within(ord(ch), _KANA) for ch in run) else CHINESE
    return script


def _in_gb2312(ch: str) -> bool:
    # Fandol (ctex's default fonts) sets all of GB 2312 at and above U+2000, but for U+2015
    try:
        ch.encode("gb2312")
    except UnicodeEncodeError:
        return False
    return ch != "\u2015"


# --- what a document needs -----------------------------------------------------------------------


@cache
def _beyond_pdflatex() -> re.Pattern[str]:
    # beyond ASCII, what pdflatex sets with T1 and TS1 fonts (inputenc utf8) or the escaper writes as math
    latin1 = {chr(c) for c in range(0xA1, 0x100) if c != 0xAD}
    extended_a = {chr(c) for c in range(0x100, 0x180)} - set("ĦħĸĿŀŉŦŧſ")  # T1 has no glyph for these nine
    sets = "".join(sorted(latin1 | extended_a | set("–—‘’“”") | MATH_SYMBOLS))
    return re.compile(f"[^\x00-\x7f{re.escape(sets)}]")  # a regex: a whole document is read at C speed


def is_pdflatex_text(text: str) -> bool:
    """Whether pdflatex (T1 fonts, inputenc utf8) sets every character of ``text``."""
    return _beyond_pdflatex().search(text) is None


def beyond_pdflatex(text: str) -> str | None:
    """The first character of ``text`` that pdflatex does not set, or None."""
    found = _beyond_pdflatex().search(text)
    return found.group(0) if found else None


def engine_for(texts: list[str], lang: str | None = None) -> str:
    """The TeX engine a document needs: pdflatex for what it sets (English, Latin-1), else xelatex."""
    return "pdflatex" if lang != "zh" and all(is_pdflatex_text(t) for t in texts) else "xelatex"


def fonts_for(texts: list[str]) -> tuple[Script, ...]:
    """The fonts beyond the document's own that the runs of ``texts`` need, in a fixed order."""
    used = {font.key for text in texts for font, _ in runs(text) if font is not None}
    return tuple(s for s in (*SCRIPTS, CHINESE, JAPANESE) if s.key in used)


def fonts_named(tex: str) -> tuple[Script, ...]:
    """The script fonts a LaTeX document uses, by the names of its ``\\symattn<key>`` macros."""
    used = set(re.findall(r"\\symattn([a-z]+)", tex))
    return tuple(s for s in (*SCRIPTS, CHINESE, JAPANESE) if s.key in used)


def has_cjk(texts: list[str]) -> bool:
    """Whether any text has Chinese or Japanese characters: LaTeX then needs ctex (xeCJK) and xelatex."""
    cjk = _BY_KEY["cjk"]
    return any(script_of(ch) is cjk for text in texts for ch in text)
