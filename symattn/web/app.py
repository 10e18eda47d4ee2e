"""The web application of ``symattn serve``: the page, its JSON API, and the guard on every request.

The page (``templates/app.html.j2`` with ``symattn/web/``) keeps all its state
in the browser; the server keeps none. It calls a small JSON API, which
scripts may use too:

``POST /api/render``   ``{"spec": {…}, "format": "html"}``: the HTML fragment (math as TeX, for
                       KaTeX) with the figures' SVG and each step's LaTeX, or the Markdown or LaTeX
                       text, and the intermediates of ``compute``;
``POST /api/check``    ``{"spec": {…}, "claims": {…}}``: the report data and its HTML fragment;
``POST /api/export``   ``{"spec": {…}, "format": …}``: Markdown, LaTeX, PDF, HTML or the spec as
                       TOML (``"what": "report"`` with claims: the check report) as a download;
``POST /api/parse``    ``{"toml": "…"}``: a TOML file read by the spec reader (never evaluated);
``POST /api/hint``     ``{"spec": {…}, "quantity": …, "claims": {…}}``: practice mode's hint of one step
                       (:mod:`symattn.web.practice`);
``GET /api/examples``  the built-in examples.

Bad input answers 400 with ``{"error": <the CLI's one-line message>, "where": {source, key,
position}}``; a body over :data:`~symattn.input.limits.BODY_BYTES` 413; work over the time limit 422
(TeX's own limit too); a full queue 503. The work itself is done by :mod:`symattn.web.pool`'s workers.
Starlette and uvicorn (the ``web`` extra) are imported only here and in :mod:`symattn.web.serve`, on use.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from symattn.input.errors import SymattnError, shown
from symattn.input.limits import BODY_BYTES, REQUEST_SECONDS, WORKERS
from symattn.input.messages import messages_in, said
from symattn.web.pool import Failure, Pool
from symattn.web.tasks import REQUEST_SOURCE, is_pdf_export, where

LANGS = ("zh", "en")  # the page's languages: a browser's zh-* opens it in Chinese, any other in English
WEB_EXTRA = 'symattn serve needs the web extra (Starlette and uvicorn); install it with: pip install "symattn[web]"'


class WebExtraMissing(SymattnError, ImportError):
    """Starlette or uvicorn is not installed."""


def web_extra() -> None:
    """Raise :class:`WebExtraMissing` (which says how to install it) unless Starlette and uvicorn are here."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise WebExtraMissing(WEB_EXTRA) from None


def _ui_strings() -> dict[str, dict[str, Any]]:
    """What the page says, per language: its own [ui] phrases and the report's words for verdicts."""
    from symattn.input.languages import languages
    from symattn.rendering.phrases import load_language

    out = {}
    for lang in languages():
        prose = load_language(lang)
        out[lang] = {section: prose[section] for section in ("ui", "verdict", "quantity", "slip")}
        out[lang]["cjk_spacing"] = prose["cjk_spacing"]
        out[lang]["list_sep"] = prose["list_sep"]  # a list in a sentence: "「猫」、「坐」"
        practice = prose["practice"]
        out[lang]["practice"] = {
            "question": practice["question"],
            "block": practice["block"],
            "block_one": practice["block_one"],
            **{key: practice[key] for key in ("every", "absorbed", "absorbed_output", "turn_positions", "heads")},
            "absorbed_turned": practice["absorbed_turned"],  # the absorbed question with MLA's turned decoupled dims
            **{key: practice[key] for key in ("angle", "trig", "trig_tables", "Q_rot", "K_rot")},  # the turn's steps
            **{key: practice[key] for key in ("rms", "Q_norm", "K_norm")},  # QK-norm's
            "caption": practice["caption"],
            "quote": prose["quote"],
        }
        out[lang]["report"] = {
            k: prose["report"][k] for k in ("expected", "carried_from", "truncated", "masked", "sep")
        }
    return out


def _examples() -> list[dict[str, Any]]:
    from symattn.input import builtin
    from symattn.input.files import read_table

    out = []
    for name in builtin.names():
        for path in sorted(builtin.EXAMPLES.glob(f"{name}.*.toml")):
            data = read_table(path)
            title = data.get("title", name)
            out.append(
                {
                    "name": name,
                    "lang": path.name.split(".")[1],
                    "title": title,
                    "plain_title": plain_title(title),
                    "spec": data,
                }
            )
    return out


def plain_title(title: str) -> str:
    """A title as plain text, for a menu (:func:`symattn.input.titlemath.plain_title`)."""
    from symattn.input.titlemath import plain_title as written_out

    return written_out(title)


def browser_language(accept: str) -> str:
    """The page's language from an Accept-Language header: zh for the first zh-* it prefers, else en."""
    tags = []
    for k, part in enumerate(accept.split(",")):
        tag, _, params = part.strip().partition(";")
        weight = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name.strip() == "q":
                try:
                    weight = float(value)  # a preference's weight, never a number of the math
                except ValueError:
                    weight = 0.0
                if not 0.0 <= weight <= 1.0:  # nan and out-of-range weights count for nothing
                    weight = 0.0
        tags.append((-weight, k, tag.strip().lower().split("-")[0]))
    return next((code for _, _, code in sorted(tags) if code in ("zh", "en")), "en")


def _has_tex() -> bool:
    import shutil

    return shutil.which("latexmk") is not None and (shutil.which("xelatex") or shutil.which("pdflatex")) is not None


def _script_json(data: Any) -> str:
    # safe inside <script type="application/json">: no "</script>", no "<!--"
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


def variants() -> list[dict[str, Any]]:
    """The page's "variant" area, one entry per spec key: its kind ("select" with its choices, "flag" (true
    or left out), "number" with its bounds, "text": a number or word as typed, sent as text for the spec
    reader to read, "list": numbers typed "a, b", or "table": rows typed "a, b; c, d", each with its
    placeholder ``hint``) and the value a spec without the key has. A variant's keys are its part's
    ``web_fields`` (symattn.variants), each with its [ui] phrase, named as the key, and for a select one per
    choice, ``<key>_<choice>``; an empty number or text leaves the key out of the spec."""
    from symattn.input import limits
    from symattn.input.choices import MASKS, SOFTMAXES
    from symattn.variants import WEB_FIELDS

    return [
        {"key": "mask", "kind": "select", "choices": list(MASKS), "default": "none"},
        {"key": "softmax", "kind": "select", "choices": list(SOFTMAXES), "default": "plain"},
        {"key": "heads", "kind": "number", "min": 1, "max": limits.HEADS, "default": "1"},
        {"key": "kv_heads", "kind": "number", "min": 1, "max": limits.KV_HEADS, "default": ""},
        *(dict(field) for field in WEB_FIELDS),  # each part's own
    ]


def _with_hint(field: Mapping[str, Any]) -> dict[str, Any]:
    """A list's or table's placeholder: the part's own [ui] phrase where it names one, else one per head."""
    hints = {"list": "list_hint", "table": "table_hint"}
    return {"hint": hints[field["kind"]], **field} if field["kind"] in hints else dict(field)


def page_html(initial: Mapping[str, Any], lang: str = "zh", given: bool = False) -> str:
    """The page, in the language of the spec it opens with (``given``: named on the command line, so it
    wins over what the browser kept from last time; else the page opens the built-in example in the
    browser's language, both of which it carries)."""
    import markupsafe

    from symattn.input import builtin
    from symattn.input.choices import EXPANDS, MASKS, ROUNDINGS
    from symattn.input.files import read_table
    from symattn.input.languages import languages
    from symattn.rendering.environment import template_environment
    from symattn.rendering.html import katex_version

    strings = _ui_strings()
    boot = {
        "initial": initial,
        "given": given,
        "builtin": {} if given else {code: read_table(builtin.example_path(builtin.DEFAULT, code)) for code in LANGS},
        "strings": strings,
        "languages": languages(),
        "tex": _has_tex(),
        "choices": {"rounding": ROUNDINGS, "expand": EXPANDS, "mask": MASKS},
        "variants": [_with_hint(field) for field in variants()],
        "limits": {"body": BODY_BYTES},
    }
    template = template_environment(autoescape=True).get_template("app.html.j2")
    return template.render(
        lang=lang,
        html_lang={"zh": "zh-CN"}.get(lang, lang),
        ui=strings[lang]["ui"],
        languages=languages(),
        strings=strings,
        boot=markupsafe.Markup(_script_json(boot)),
        katex_version=katex_version(),
        tex=boot["tex"],
        choices=boot["choices"],
        variants=boot["variants"],
    )


SECURITY_HEADERS = {
    # everything comes from this server: no CDN, no inline script; KaTeX sets inline styles
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self'; connect-src 'self'; object-src 'none'; "
    "base-uri 'none'; frame-ancestors 'none'; form-action 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}


def create_app(
    initial: Mapping[str, Any] | None = None,
    seconds: float | None = None,
    *,
    workers: int = WORKERS,
    hosts: tuple[str, ...] | None = ("127.0.0.1", "localhost", "::1"),
):
    """The Starlette application. ``initial``: the spec mapping the page opens with (default: the
    built-in example). ``hosts``: the names the Host header may give (None: any, for --allow-remote);
    a page on another name (DNS rebinding) gets 421."""
    web_extra()
    from contextlib import asynccontextmanager
    from pathlib import Path

    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse, JSONResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    from symattn.input import builtin
    from symattn.input.files import read_table
    from symattn.rendering.html import VENDOR

    given = initial is not None
    lang = initial.get("lang") if initial is not None and initial.get("lang") in ("zh", "en") else "en"
    pool = Pool(workers, seconds or REQUEST_SECONDS)
    cache: dict[str, Any] = {}

    def failure(status: int, message: str, where: Any = None) -> Response:
        return JSONResponse({"error": message, "where": where}, status_code=status)

    async def body_of(request) -> Any:
        from symattn.input.files import parse_text

        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json":
            # a cross-site form cannot send JSON without asking first (CORS), which this server never allows
            raise Failure(415, f"{REQUEST_SOURCE}: {said('json_body')}")
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > BODY_BYTES):
            raise Failure(413, _too_large())
        from starlette.requests import ClientDisconnect

        data = bytearray()
        try:
            async for chunk in request.stream():
                data += chunk
                if len(data) > BODY_BYTES:
                    raise Failure(413, _too_large())
        except ClientDisconnect:
            print(
                f"symattn serve: {request.method} {request.url.path}: the client went away before sending the "
                f"whole body ({len(data)} bytes came)",
                file=sys.stderr,
                flush=True,
            )
            raise Failure(400, f"{REQUEST_SOURCE}: {said('body_ended')}") from None
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Failure(400, f"{REQUEST_SOURCE}: {said('not_utf8', byte=exc.start + 1)}") from None
        try:
            # numbers keep their text, as in a spec file: 0.1 is one tenth, never a float
            parsed = parse_text(text, REQUEST_SOURCE, json_=True)
        except SymattnError as exc:
            raise Failure(400, str(exc), where(exc)) from None
        return parsed

    def api(name: str, respond):
        async def endpoint(request):
            # the errors in the language the page asks in (its own, sent as Accept-Language)
            with messages_in(browser_language(request.headers.get("accept-language", ""))):
                try:
                    body = await body_of(request)
                    if name == "export" and is_pdf_export(body):
                        from symattn.input.limits import LATEX_SECONDS

                        return respond(await pool.run("export-pdf", body, LATEX_SECONDS, tex=True))
                    return respond(await pool.run(name, body))
                except Failure as exc:
                    return failure(exc.status, exc.message, exc.where)

        return endpoint

    def download(result) -> Response:
        data, media, filename = result
        return Response(data, media_type=media, headers={"content-disposition": f'attachment; filename="{filename}"'})

    async def index(request):
        # a spec given is in its own language; the built-in example opens in the browser's
        code = lang if given else browser_language(request.headers.get("accept-language", ""))
        if ("page", code) not in cache:
            shown = initial if given else read_table(builtin.example_path(builtin.DEFAULT, code))
            cache["page", code] = page_html(shown, code, given)
        return HTMLResponse(cache["page", code], headers={"cache-control": "no-cache", "vary": "accept-language"})

    async def examples(request):
        if "examples" not in cache:
            cache["examples"] = _examples()
        return JSONResponse(cache["examples"])

    @asynccontextmanager
    async def lifespan(app):
        await pool.start()
        try:
            yield
        finally:
            await pool.stop()

    here = Path(__file__).resolve().parent  # symattn/web: the page's own files
    routes = [
        Route("/", index),
        Route("/api/render", api("render", JSONResponse), methods=["POST"]),
        Route("/api/check", api("check", JSONResponse), methods=["POST"]),
        Route("/api/export", api("export", download), methods=["POST"]),
        Route("/api/parse", api("parse", JSONResponse), methods=["POST"]),
        Route("/api/hint", api("hint", JSONResponse), methods=["POST"]),
        Route("/api/examples", examples),
        Mount("/static", StaticFiles(directory=str(here))),
        Mount("/katex", StaticFiles(directory=str(VENDOR))),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.pool = pool
    return _Guard(app, hosts)


def _too_large() -> str:
    return f"{REQUEST_SOURCE}: {said('body_large', kib=BODY_BYTES // 1024)}"


class _Guard:
    """ASGI middleware: the Host header must name this machine (against DNS rebinding), and every
    response carries the security headers."""

    def __init__(self, app, hosts: tuple[str, ...] | None):
        self.app = app
        self.state = app.state
        self.hosts = None if hosts is None else {h.lower().strip("[]") for h in hosts}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def secured(message):
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + [
                    (k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()
                ]
            await send(message)

        if self.hosts is not None:
            host = dict(scope["headers"]).get(b"host", b"").decode("latin-1").lower()
            name = host.rsplit("]", 1)[0].lstrip("[") if host.startswith("[") else host.split(":")[0]
            if name not in self.hosts:
                from starlette.responses import JSONResponse

                response = JSONResponse(
                    {"error": f"{REQUEST_SOURCE}: host {shown(host)!r} is not this server's", "where": None},
                    status_code=421,
                )
                return await response(scope, receive, secured)
        return await self.app(scope, receive, secured)
