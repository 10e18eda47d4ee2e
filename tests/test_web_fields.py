"""The live page's variant fields: every part's ``web_fields`` has its [ui] label (and one per choice) in
every language, since a field without one stops the page from rendering, and so from saving."""

from __future__ import annotations

import markupsafe
import pytest

from symattn.input.languages import languages
from symattn.rendering.phrases import load_language
from symattn.variants import PARTS
from symattn.web.app import page_html, variants

# what a field of each kind shows besides its label: a placeholder phrase
PLACEHOLDERS = {"list": "list_hint", "table": "table_hint"}


def _labels(field) -> list[str]:
    """The [ui] phrases a variant field shows: its label, one per choice, and its kind's placeholder."""
    key = field["key"]
    choices = [f"{key}_{choice}" for choice in field.get("choices", ())] if field["kind"] in ("select", "flag") else []
    return [key, *choices, *([PLACEHOLDERS[field["kind"]]] if field["kind"] in PLACEHOLDERS else [])]


def test_every_field_kind_is_one_the_page_draws():
    assert {field["kind"] for field in variants()} <= {"select", "flag", "number", "text", "list", "table"}


@pytest.mark.parametrize("lang", languages())
@pytest.mark.parametrize("part", PARTS, ids=lambda part: part.name)
def test_every_parts_web_fields_have_their_labels(part, lang):
    ui = load_language(lang)["ui"]
    missing = [
        (field["key"], label)
        for field in part.web_fields
        for label in _labels(field)
        if not isinstance(ui.get(label), str) or not ui[label].strip()
    ]
    assert missing == [], f"templates/lang/{lang}.toml [ui] lacks labels of {part.name}'s web_fields"


@pytest.mark.parametrize("lang", languages())
def test_the_page_has_a_label_for_each_variant_field(lang):
    html = page_html({}, lang)
    ui = load_language(lang)["ui"]
    for field in variants():
        assert f'<label for="set-{field["key"]}" data-ui="{field["key"]}">' in html
        assert f">{markupsafe.escape(ui[field['key']])}</label>" in html
