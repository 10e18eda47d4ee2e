"""A class's variants as one LMS quiz file: Moodle XML (:mod:`symattn.classroom.moodle`) or a QTI 1.2 zip
for Canvas (:mod:`symattn.classroom.qti`); their results come back through :mod:`symattn.classroom.lmsgrade`."""

from __future__ import annotations

from collections.abc import Sequence

from symattn.classroom.variants import Variant

FORMATS = ("moodle", "qti")


def quiz_file(variants: Sequence[Variant], fmt: str, lang: str | None = None) -> bytes:
    """The quiz of every variant in ``fmt`` (moodle or qti), in the template's language unless ``lang``."""
    if fmt == "moodle":
        from symattn.classroom.moodle import moodle_xml

        return moodle_xml(variants, lang)
    if fmt == "qti":
        from symattn.classroom.qti import qti_zip

        return qti_zip(variants, lang)
    raise ValueError(f"unknown LMS format {fmt!r}; expected one of {', '.join(FORMATS)}")


__all__ = ["FORMATS", "quiz_file"]
