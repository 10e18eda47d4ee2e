"""The live page's variant fields: every part's ``web_fields`` has its [ui] label (and one per choice) in
every language, since a field without one stops the page from rendering, and so from saving."""

from __future__ import annotations

import markupsafe
import pytest

from symattn.input.languages import languages
from symattn.rendering.phrases import load_language
from symattn.variants import PARTS
from symattn.web.app import page_html, variants

# what a list or table field shows besides its label when its part names no placeholder of its own
PLACEHOLDERS = {"list": "list_hint", "table": "table_hint"}


def _labels(field) -> list[str]:
    """The [ui] phrases a variant field shows: its label, one per choice, and its placeholder."""
    key = field["key"]
    choices = [f"{key}_{choice}" for choice in field.get("choices", ())] if field["kind"] in ("select", "flag") else []
    hint = field.get("hint", PLACEHOLDERS.get(field["kind"]))
    return [key, *choices, *([hint] if hint else [])]


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


@pytest.mark.parametrize(
    "key, en, zh",
    [
        ("positions", "e.g. 3 (one per query)", "如 3（每个查询一个）"),
        ("key_positions", "e.g. 0, 1, 2, 3 (one per key)", "如 0, 1, 2, 3（每个键一个）"),
        ("rope_frequencies", "e.g. 1, 0.01 (one per pair)", "如 1, 0.01（每对一个）"),
        ("sinks", "e.g. 0.5, 0.25 (one per head)", "如 0.5, 0.25（每头一个）"),
        ("rope_cos", "e.g. 1, 0.5; 0.87, 0.25 (rows split by ;)", "如 1, 0.5; 0.87, 0.25（行间用 ; 分隔）"),
    ],
)
def test_a_list_field_says_what_it_holds_one_of(key, en, zh):
    # positions once said "(one per head)", the placeholder of every list
    for lang, hint in (("en", en), ("zh", zh)):
        html = page_html({}, lang)
        field = html[html.index(f'<input id="set-{key}"') :]
        field_of = next(v for v in variants() if v["key"] == key)
        name = field_of.get("hint", PLACEHOLDERS.get(field_of["kind"]))
        assert field[: field.index(">")].endswith(
            f'placeholder="{markupsafe.escape(hint)}" data-ui-placeholder="{name}"'
        )
