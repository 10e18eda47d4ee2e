"""Every label of every figure lies inside its SVG in Chromium: the HTML page and the reveal.js deck, long
German and Vietnamese labels as rows (set right-aligned before the cells) and as columns (upright or
rotated), one head and several, in both languages. The labels' widths come from a font-metric table."""

from __future__ import annotations

import tomllib
from decimal import Decimal

import pytest

from symattn.derivation.derive import derive
from symattn.input import builtin
from symattn.input.spec import load_spec
from symattn.rendering.deck import deck_page
from symattn.rendering.figure_parts import text_width
from symattn.rendering.html import derivation_page

from .conftest import chromium_driver

TOKENS = {
    "long": ["người", "Wohnungsschlüssel", "it"],
    "vietnamese": ["người", "ăn", "cơm"],
}


def spec(tokens: str, lang: str, heads: bool) -> dict:
    raw = tomllib.loads(builtin.example_path("multihead" if heads else "seed", lang).read_text(encoding="utf-8"))
    raw.update(tokens=TOKENS[tokens], lang=lang)
    raw.pop("focus", None)
    return raw


@pytest.fixture(scope="module")
def driver():
    d = chromium_driver(window="1280,720", scrollbars=False)
    try:
        yield d
    finally:
        d.quit()


# Each figure on the current page (or the deck's each slide): the texts whose box leaves the SVG's box.
OUTSIDE = """
const outside = [], seen = [];
function measure(root) {
  root.querySelectorAll('svg.symattn-figure').forEach(svg => {
    const b = svg.getBoundingClientRect();
    svg.querySelectorAll('text').forEach(t => {
      const r = t.getBoundingClientRect();
      seen.push(t.textContent);
      if (r.left < b.left || r.right > b.right || r.top < b.top || r.bottom > b.bottom)
        outside.push(t.textContent);
    });
  });
}
if (window.Reveal) {
  for (let k = 0; k < Reveal.getTotalSlides(); k++) { Reveal.slide(k); measure(Reveal.getCurrentSlide()); }
} else {
  measure(document);
}
return {outside, seen};
"""


def test_widths_come_from_the_font_metric_table():
    assert text_width("người", Decimal(8)) == Decimal("22.696")  # n 634, g 635, ư 674, ờ as ơ 616, i 278
    assert text_width("W", Decimal(10), bold=True) == Decimal("11.04")
    assert text_width("注意", Decimal(10)) == Decimal(20)


@pytest.mark.client
@pytest.mark.parametrize("tokens", sorted(TOKENS))
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("heads", [False, True])
@pytest.mark.parametrize("page", ["html", "slides"])
def test_every_label_lies_inside_its_figure(driver, tmp_path, tokens, lang, heads, page):
    d = derive(load_spec(spec(tokens, lang, heads)))
    target = tmp_path / "page.html"
    target.write_text(derivation_page(d) if page == "html" else deck_page(d), encoding="utf-8")
    driver.get(target.as_uri())
    driver.execute_async_script("const done = arguments[0]; document.fonts.ready.then(() => done());")
    shown = driver.execute_script(OUTSIDE)
    assert set(TOKENS[tokens]) <= set(shown["seen"])
    assert shown["outside"] == []
