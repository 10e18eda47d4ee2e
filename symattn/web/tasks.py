"""The work a request asks for, done in a worker process: the JSON API's tasks (render, check, export,
parse), the spec as a TOML download, and :func:`run_task`, which answers every bad input as an HTTP error."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from symattn.input.errors import BRIEF, LimitError, SpecError, SymattnError, clip, evaluating, shown
from symattn.web.body import (
    REQUEST_SOURCE,
    SPEC_SOURCE,
    claims_of,
    flag,
    request_fields,
    request_reader,
    spec_of,
)
from symattn.web.practice import hint_task

RENDER_FORMATS = ("html", "markdown", "latex")
EXPORT_FORMATS = ("markdown", "latex", "pdf", "html", "toml")
REPORT_EXPORT_FORMATS = ("markdown", "latex", "pdf", "html", "text", "json")


def _is_text(value: Any) -> bool:
    # a JSON number comes as its text (FloatText, a str) so that 0.1 stays one tenth: it is not a string
    from symattn.input.files import FloatText

    return isinstance(value, str) and not isinstance(value, FloatText)


def _derivation(spec: Any) -> tuple[Any, Any]:
    """The derivation and the exact model it was derived from (of any kind: compute takes each)."""
    from symattn.derivation.derive import derive
    from symattn.exact.factory import build

    model = build(spec)
    return derive(spec, model), model


def render_task(body: Any) -> dict[str, Any]:
    """POST /api/render: the derivation as an HTML fragment (or Markdown, LaTeX) and its intermediates.

    With HTML come its figures (``figures``: id, kind and SVG of each) and the kind of each step the
    fragment shows (``step_kinds``, one per ``<h2>``, in order); with ``"latex_steps": true``, the LaTeX
    of each of those steps (``latex_steps``)."""
    from symattn.derivation.intermediates import MAX_DIGITS, compute
    from symattn.input.reader import parse_index
    from symattn.rendering.export import export
    from symattn.rendering.html import markdown_to_html

    reader = request_reader(REQUEST_SOURCE)
    body = request_fields(body, ("spec", "format", "compute", "exact", "digits", "latex_steps"))
    fmt = reader.choice(body.get("format", "html"), "format", RENDER_FORMATS)
    digits = parse_index(body.get("digits", 15))
    if digits is None or not 1 <= digits <= MAX_DIGITS:
        raise reader.error("digits", f"expected an integer from 1 to {MAX_DIGITS}")
    spec = spec_of(body["spec"])
    derivation, model = _derivation(spec)
    out: dict[str, Any] = {"lang": derivation.lang}
    if fmt == "html":
        from symattn.rendering.figures import all_figures
        from symattn.rendering.step_latex import step_latex
        from symattn.rendering.svg import svg

        out["html"], out["title"] = markdown_to_html(export(derivation, "markdown").text)
        # the handouts' own SVG pictures, and the kind of each step shown (one per <h2>)
        out["figures"] = [{"id": f.id, "kind": f.kind, "svg": svg(f)} for f in all_figures(derivation)]
        out["step_kinds"] = [step.kind for step in derivation.steps if step.kind != "picture"]
        if flag(body, "latex_steps", False):
            # asked for when a "copy as LaTeX" button is pressed: it costs as much as the whole LaTeX
            out["latex_steps"] = list(step_latex(derivation))
    else:
        out["text"] = export(derivation, fmt).text
    if flag(body, "compute", True):
        # closed forms are most of compute's time (an 8×8 spec: 0.2 s), so they are asked for
        out["compute"] = compute(spec, model, digits, exact=flag(body, "exact", False))
    return out


def check_task(body: Any) -> dict[str, Any]:
    """POST /api/check: the verdicts (report_data, with 0-based places) and the report as an HTML fragment."""
    from symattn.checking.checker import check
    from symattn.checking.report import report_data
    from symattn.rendering.export import export
    from symattn.rendering.html import markdown_to_html

    body = request_fields(body, ("spec", "claims", "html"), ("spec", "claims"))
    spec = spec_of(body["spec"])
    report = check(spec, claims_of(spec, body["claims"]))
    data = report_data(report)
    # where each verdict stands, 0-based, so the page finds its box without matching labels
    data["places"] = [[v.claim.quantity, v.claim.row, v.claim.col] for v in report.results]
    if flag(body, "html", True):
        data["html"], _ = markdown_to_html(export(report, "markdown").text)
    data["lang"] = report.lang
    return data


def export_task(body: Any, tex: bool = False) -> tuple[bytes, str, str]:
    """POST /api/export: (content, media type, file name) of a derivation, a report or the spec.

    ``tex``: the server sent it as a PDF export (:func:`is_pdf_export`), under its limit on TeX runs.
    """
    from symattn.rendering.export import export

    reader = request_reader(REQUEST_SOURCE)
    body = request_fields(body, ("spec", "format", "what", "claims"), ("spec", "format"))
    what = reader.choice(body.get("what", "derivation"), "what", ("derivation", "report"))
    formats = EXPORT_FORMATS if what == "derivation" else REPORT_EXPORT_FORMATS
    fmt = reader.choice(body["format"], "format", formats)
    if (fmt == "pdf") != tex:
        raise RuntimeError("a PDF export must come as the task export-pdf, and only a PDF export")
    spec = spec_of(body["spec"])
    name = "symattn" if what == "derivation" else "symattn-check"
    if fmt == "toml":
        return spec_toml(body["spec"]).encode("utf-8"), "application/toml; charset=utf-8", f"{name}.toml"
    if what == "derivation":
        document: Any = _derivation(spec)[0]
    elif "claims" not in body:
        raise reader.error("claims", "missing (a report needs claims)")
    else:
        from symattn.checking.checker import check

        document = check(spec, claims_of(spec, body["claims"]))
    made = export(document, fmt, standalone=fmt == "latex")  # a LaTeX download is a whole document
    return made.data, made.media, f"{name}.{made.suffix}"


def parse_task(body: Any) -> dict[str, Any]:
    """POST /api/parse: a TOML spec (or claims file) read as the spec reader reads files, then checked.

    ``{"toml": text, "name": file name}`` in; ``{"spec": {…}}`` out, with
    ``"claims"`` when the file has a claims table. Nothing in the text is run.
    """
    from symattn.input.files import parse_text

    reader = request_reader(REQUEST_SOURCE)
    body = request_fields(body, ("toml", "name"), ("toml",))
    text = body["toml"]
    if not _is_text(text):
        raise reader.error("toml", "expected the text of a TOML file")
    name = body.get("name", "<pasted>")
    if not _is_text(name) or not name.strip() or len(name) > 200:
        raise reader.error("name", "expected a file name")
    name = name.replace("\\", "/").rsplit("/", 1)[-1] or "<pasted>"
    data = parse_text(text.lstrip("\ufeff"), name)
    if "spec" in data and isinstance(data.get("spec"), str):
        raise request_reader(name).error(
            "spec",
            "a spec given by path cannot be opened in the page; open the spec file, or put its keys in this file",
        )
    spec = {k: v for k, v in data.items() if k not in ("claims", "student")}
    from symattn.input.spec import spec_from_mapping

    spec_from_mapping(spec, name)  # the same messages as the CLI's, naming the file
    out: dict[str, Any] = {"spec": spec}
    if "claims" in data:
        out["claims"] = data["claims"]
    return out


def is_pdf_export(body: Any) -> bool:
    """Whether a POST /api/export body asks for TeX (the server decides so before a worker reads it)."""
    return isinstance(body, Mapping) and body.get("format") == "pdf"


TASKS: dict[str, Callable[[Any], Any]] = {
    "render": render_task,
    "check": check_task,
    "export": export_task,
    "export-pdf": lambda body: export_task(body, tex=True),
    "parse": parse_task,
    "hint": hint_task,
}


# --- the spec as TOML ------------------------------------------------------------

# keys whose values are text: a label "1" must stay a string; elsewhere a number's text is written bare
_TEXT_KEYS = {
    "title",
    "tokens",
    "key_tokens",
    "lang",
    "rounding",
    "expand",
    "softmax",
    "notation",
    "paper",
    "engine",
    "cjk_font",
}


def spec_toml(spec: Mapping[str, Any]) -> str:
    """A (valid) spec mapping as a TOML file that reads back to the same spec."""
    text = _toml_document(spec, numbers=True)
    if _reads_back(text, spec):
        return text
    return _toml_document(spec, numbers=False)  # every value as the request gave it: the same spec, surely


def _toml_document(spec: Mapping[str, Any], numbers: bool) -> str:
    from symattn.input.spec import SPEC_KEYS
    from symattn.rendering.tomlwrite import toml_key, toml_value

    order = {k: i for i, k in enumerate(SPEC_KEYS)}
    keys = sorted(spec, key=lambda k: order.get(k, len(order)))
    tokens = spec.get("tokens") or []
    lines = ["# symattn spec, written by symattn serve; render it with: symattn render FILE.toml"]
    tables = []
    for key in keys:
        value = spec[key]
        numeric = numbers and key not in _TEXT_KEYS and not (key == "focus" and value in tokens)
        if isinstance(value, Mapping):
            tables.append((key, value, numeric))
        else:
            lines.append(f"{toml_key(key)} = {toml_value(value, numeric)}")
    for key, table, numeric in tables:
        lines += ["", f"[{toml_key(key)}]"]
        lines += [f"{toml_key(k)} = {toml_value(v, numeric)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def _reads_back(text: str, spec: Mapping[str, Any]) -> bool:
    from symattn.input.files import parse_text
    from symattn.input.spec import spec_from_mapping

    try:
        return spec_from_mapping(parse_text(text, SPEC_SOURCE), SPEC_SOURCE) == spec_from_mapping(spec, SPEC_SOURCE)
    except SymattnError:
        return False


# --- running one task, in the worker -------------------------------------------


def run_task(name: str, body: Any, seconds: float) -> tuple[str, Any]:
    """("ok", result) or ("error", (status, message, where)): never raises for bad input."""
    from symattn.input.limits import deadline
    from symattn.rendering.pdf import TexTimeLimit

    start = time.monotonic()
    try:
        with deadline(seconds, REQUEST_SOURCE), evaluating("spec"):  # a rounding not decided names the spec
            return "ok", TASKS[name](body)
    except TexTimeLimit as exc:
        return "error", (422, str(exc), None)
    except SymattnError as exc:
        if isinstance(exc, LimitError) and time.monotonic() - start >= seconds:
            return "error", (422, str(exc), None)
        return "error", (400, str(exc), where(exc))
    except RecursionError:
        return "error", (400, f"{REQUEST_SOURCE}: nested too deep", None)
    except Exception as exc:
        if time.monotonic() - start < seconds:
            raise  # a bug: the worker logs it and answers 500
        # the alarm landed where some code turned it into another error: it is still the time limit
        print(
            f"symattn serve: the time limit surfaced as {type(exc).__name__}: {shown(exc)}", file=sys.stderr, flush=True
        )
        return "error", (422, time_limit_message(seconds), None)


def time_limit_message(seconds: float) -> str:
    return f"{REQUEST_SOURCE}: took longer than {seconds:g} s (the time limit; raise it with --max-seconds)"


def where(exc: SymattnError) -> dict[str, Any] | None:
    if isinstance(exc, SpecError):  # the key as the page names its fields: a 200 KB key names none of them
        return {"source": exc.source, "key": exc.key and clip(exc.key, 2 * BRIEF), "position": list(exc.position)}
    return None
