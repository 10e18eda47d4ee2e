"""An IMS QTI 1.2 package of a class's variants, as Canvas imports it: a zip with ``imsmanifest.xml``.

One assessment (a Canvas quiz) per variant, to assign to its student; in it, a text item with the
student's numbers, then one ``numerical_question`` item per asked number (:mod:`symattn.classroom.gaps`).
Canvas's numerical question holds one number, and its "fill in multiple blanks" matches text, never a
number within a tolerance; so a variant is a quiz of numeric items rather than one item. Each item accepts
the value exactly or within its tolerance, written as Canvas writes "exact answer with margin" (``varequal``
or ``vargte`` … ``varlte``).

Written with :mod:`zipfile` and :mod:`xml.etree.ElementTree` (stdlib): QTI 1.2 is a few fixed elements,
which no maintained library writes better (text2qti reads its own Markdown, not our numbers). The zip is
the same bytes for the same variants: fixed timestamps and modes, entries sorted.
"""

from __future__ import annotations

import hashlib
import io
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Sequence

from symattn.classroom.gaps import Gap, gaps
from symattn.classroom.lmstext import decimals_note, intro, label_cells, numbered, phrases, plain_phrases, title
from symattn.classroom.variants import Variant
from symattn.input.errors import SpecError

QTI = "http://www.imsglobal.org/xsd/ims_qtiasiv1p2"
MANIFEST = "http://www.imsglobal.org/xsd/imsccv1p1/imscp_v1p1"
STAMP = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip can hold: no build time leaks into the bytes


def ident(v: Variant, k: int | None = None) -> str:
    """An XML identifier (an NCName: it starts with a letter) for a variant's assessment or its k-th item."""
    return f"symattn-{v.id}" + ("" if k is None else f"-{k}")


def _field(parent: ET.Element, label: str, entry: str) -> None:
    f = ET.SubElement(parent, "qtimetadatafield")
    ET.SubElement(f, "fieldlabel").text = label
    ET.SubElement(f, "fieldentry").text = entry


def _material(parent: ET.Element, html: str) -> None:
    ET.SubElement(ET.SubElement(parent, "material"), "mattext", {"texttype": "text/html"}).text = html


def _item(section: ET.Element, item_id: str, item_title: str, kind: str) -> ET.Element:
    item = ET.SubElement(section, "item", {"ident": item_id, "title": item_title})
    meta = ET.SubElement(ET.SubElement(item, "itemmetadata"), "qtimetadata")
    _field(meta, "question_type", kind)
    _field(meta, "points_possible", "0" if kind == "text_only_question" else "1")
    return item


def _numerical(section: ET.Element, v: Variant, k: int, gap: Gap, t) -> None:
    item = _item(section, ident(v, k), gap.asked.key, "numerical_question")
    quantity, row, column = label_cells(gap.asked, v, t)
    if numbered(gap.asked.quantity):  # a column of V or of the latent by number, not "column column 2"
        column = str((gap.asked.col or 0) + 1)
    where = t("lms.item", quantity=quantity, row=row, column=t("lms.item_column", column=column) if column else "")
    html = f"<p>{where}</p>"
    if gap.rounded:  # the sheet does not round the scores, nor MLA's latent and q̃
        html += f"<p>{decimals_note(t, quantity, gap.decimals)}</p>"
    presentation = ET.SubElement(item, "presentation")
    _material(presentation, html)
    response = ET.SubElement(presentation, "response_str", {"ident": "response1", "rcardinality": "Single"})
    ET.SubElement(ET.SubElement(response, "render_fib", {"fibtype": "Decimal"}), "response_label", {"ident": "answer1"})
    processing = ET.SubElement(item, "resprocessing")
    ET.SubElement(
        ET.SubElement(processing, "outcomes"),
        "decvar",
        {"maxvalue": "100", "minvalue": "0", "varname": "SCORE", "vartype": "Decimal"},
    )
    condition = ET.SubElement(processing, "respcondition", {"continue": "No"})
    either = ET.SubElement(ET.SubElement(condition, "conditionvar"), "or")
    ET.SubElement(either, "varequal", {"respident": "response1"}).text = format(gap.value, "f")
    both = ET.SubElement(either, "and")
    ET.SubElement(both, "vargte", {"respident": "response1"}).text = format(gap.value - gap.tolerance, "f")
    ET.SubElement(both, "varlte", {"respident": "response1"}).text = format(gap.value + gap.tolerance, "f")
    ET.SubElement(condition, "setvar", {"action": "Set", "varname": "SCORE"}).text = "100"


def assessment_xml(v: Variant, lang: str) -> bytes:
    """One variant as a QTI 1.2 assessment: the numbers, then a numerical item per asked number."""
    t = phrases(lang)
    root = ET.Element("questestinterop", {"xmlns": QTI})
    plain = plain_phrases(lang)  # an attribute is plain text: ElementTree escapes it
    assessment = ET.SubElement(root, "assessment", {"ident": ident(v), "title": title(v, plain)})
    meta = ET.SubElement(assessment, "qtimetadata")
    _field(meta, "cc_maxattempts", "1")
    section = ET.SubElement(assessment, "section", {"ident": "root_section"})
    first = _item(section, ident(v, 0), plain("lms.inputs"), "text_only_question")
    _material(ET.SubElement(first, "presentation"), intro(v, t))
    for k, gap in enumerate(gaps(v), 1):
        _numerical(section, v, k, gap, t)
    return _xml(root)


def manifest_xml(variants: Sequence[Variant], digest: str) -> bytes:
    """``imsmanifest.xml``: one QTI resource per variant, each naming its assessment file."""
    root = ET.Element("manifest", {"identifier": f"symattn-{digest}", "xmlns": MANIFEST})
    meta = ET.SubElement(root, "metadata")
    ET.SubElement(meta, "schema").text = "IMS Content"
    ET.SubElement(meta, "schemaversion").text = "1.1.3"
    ET.SubElement(root, "organizations")
    resources = ET.SubElement(root, "resources")
    for v in variants:
        href = f"{ident(v)}/{ident(v)}.xml"
        resource = ET.SubElement(
            resources, "resource", {"identifier": f"resource-{ident(v)}", "type": "imsqti_xmlv1p2"}
        )
        ET.SubElement(resource, "file", {"href": href})
    return _xml(root)


def _xml(root: ET.Element) -> bytes:
    ET.indent(root)
    return (
        b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="utf-8", xml_declaration=False) + b"\n"
    )


def qti_files(variants: Sequence[Variant], lang: str | None = None) -> tuple[tuple[str, bytes], ...]:
    """Every file of the package as (path in the zip, bytes), sorted by path."""
    if not variants:
        raise SpecError("ids", None, "no students: nothing to put in the quiz")
    lang = lang or variants[0].spec.document.lang
    files = [(f"{ident(v)}/{ident(v)}.xml", assessment_xml(v, lang)) for v in variants]
    digest = hashlib.sha256(b"".join(hashlib.sha256(data).digest() for _, data in files)).hexdigest()[:16]
    files.append(("imsmanifest.xml", manifest_xml(variants, digest)))
    return tuple(sorted(files))


def qti_zip(variants: Sequence[Variant], lang: str | None = None) -> bytes:
    """The package as zip bytes, the same bytes for the same variants."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in qti_files(variants, lang):
            info = zipfile.ZipInfo(name, STAMP)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # Unix, whatever system writes it
            info.external_attr = 0o644 << 16
            z.writestr(info, data)
    return out.getvalue()


__all__ = ["assessment_xml", "ident", "manifest_xml", "qti_files", "qti_zip"]
