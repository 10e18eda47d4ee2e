"""Exercises for a class: one variant of a template per student, and the class folder that holds them.

``exercise`` draws a variant per student (:mod:`symattn.classroom.variants`, from a template read by
:mod:`symattn.classroom.template`); ``write_class`` writes each student's sheet, key and answers.toml
(:mod:`symattn.classroom.sheets`), every key in one document, an index and the template into one folder;
:mod:`symattn.classroom.roster` reads the students from a CSV file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from symattn.classroom.roster import check_distinct, check_name, check_student_id, read_roster
from symattn.classroom.sheets import EXTENSIONS, files, key_all
from symattn.classroom.template import Template, load_template
from symattn.classroom.variants import Variant, draw, variant_seed
from symattn.input import limits
from symattn.input.errors import LimitError


def exercise(
    template: str | Path | Mapping[str, Any] | Template,
    ids: Iterable[str | tuple[str, str]],
    seed: int | str,
    progress: Callable[[Sequence[Any]], Iterable[Any]] | None = None,
) -> tuple[Variant, ...]:
    """One variant per student id (or (id, name) pair), from the class seed.

    ``progress`` wraps the list of students (the CLI passes a progress bar on a terminal).
    """
    t = load_template(template)
    out = []
    entries = list(ids)
    if len(entries) > limits.STUDENTS:
        raise LimitError(t.source, "ids", f"{len(entries)} students; an exercise has at most {limits.STUDENTS}")
    pairs = [(entry, "") if isinstance(entry, str) else (str(entry[0]), str(entry[1])) for entry in entries]
    for i, (student, name) in enumerate(pairs, 1):
        check_student_id(student, t.source, "ids", i)  # a roster file was checked as it was read
        check_name(name, t.source, "ids", i)  # it heads the sheet: no control reaches TeX or the LMS file
    check_distinct(((i, student) for i, (student, _) in enumerate(pairs, 1)), t.source, "ids", "entry")
    for student, name in progress(pairs) if progress else pairs:
        out.append(draw(t, variant_seed(seed, student), student, name))
    return tuple(out)


def class_files(
    variants: Sequence[Variant],
    template: bytes,
    fmt: str = "markdown",
    lang: str | None = None,
    progress: Callable[[Sequence[Variant]], Iterable[Variant]] | None = None,
) -> tuple[tuple[str, bytes], ...]:
    """Every file of a class as (path relative to the class folder, bytes), made before anything is written.

    Each student's ``<id>/sheet.*``, ``<id>/key.*`` and ``<id>/answers.toml``; ``key-all.*`` (every key in
    one document); ``index.csv`` (id, name, variant seed, SHA-256 of each file); ``template.toml``, so that
    ``symattn grade DIR`` can rebuild every variant. ``progress`` wraps the students (a bar on a terminal).
    """
    from symattn.input.csvfile import csv_text

    ext = EXTENSIONS[fmt]
    names = (f"sheet.{ext}", f"key.{ext}", "answers.toml")
    lines = [["id", "name", "seed"] + [f"{name}_sha256" for name in names]]
    out = []
    for v in progress(variants) if progress else variants:
        digests = []
        for name, content in files(v, fmt, lang):
            data = content if isinstance(content, bytes) else content.encode("utf-8")
            out.append((f"{v.id}/{name}", data))
            digests.append(hashlib.sha256(data).hexdigest())
        lines.append([v.id, v.name, str(v.seed)] + digests)
    every = key_all(variants, fmt, lang)
    out.append((f"key-all.{ext}", every if isinstance(every, bytes) else every.encode("utf-8")))
    out.append(("index.csv", csv_text(lines[0], lines[1:]).encode("utf-8")))
    out.append(("template.toml", template))
    return tuple(out)


def write_class(
    variants: Sequence[Variant],
    folder: str,
    template_path: str | Path,
    fmt: str = "markdown",
    lang: str | None = None,
    progress: Callable[[Sequence[Variant]], Iterable[Variant]] | None = None,
    force: bool = False,
) -> None:
    """The class's files (see :func:`class_files`) in ``folder``; nothing is written if any file fails to build.

    A folder that already holds files is refused unless ``force``: it may hold answers students filled in.
    """
    from symattn.input.files import read_bytes
    from symattn.rendering.output import check_folder, write_files

    check_folder(folder, force, "returned answers", "the class")
    template = read_bytes(template_path, "a template")
    write_files(folder, class_files(variants, template, fmt, lang, progress))


__all__ = ["check_student_id", "class_files", "exercise", "read_roster", "write_class"]
