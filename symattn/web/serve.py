"""``symattn serve``: a local web page to edit the numbers and watch the derivation and the check.

The page (``templates/app.html.j2`` with ``symattn/web/``) keeps all its state
in the browser; the server keeps none. It calls a small JSON API, which
scripts may use too:

``POST /api/render``   ``{"spec": {…}, "format": "html"}``: the HTML fragment (math as TeX, for
                       KaTeX) or the Markdown or LaTeX text, and the intermediates of ``compute``;
``POST /api/check``    ``{"spec": {…}, "claims": {…}}``: the report data and its HTML fragment;
``POST /api/export``   ``{"spec": {…}, "format": …}``: Markdown, LaTeX, PDF, HTML or the spec as
                       TOML (``"what": "report"`` with claims: the check report) as a download;
``POST /api/parse``    ``{"toml": "…"}``: a TOML file read by the spec reader (never evaluated);
``GET /api/examples``  the built-in examples.

Bad input answers 400 with ``{"error": <the CLI's one-line message>, "where": {source, key,
position}}``; a body over :data:`BODY_BYTES` 413; work over the time limit 422 (TeX's own limit
too); a full queue 503.

Work never runs on the event loop: a few worker processes (:class:`_Pool`) do it,
each request under SIGALRM (:func:`symattn.input.limits.deadline`, which works in a
process's main thread) and, as a backstop for code that ignores signals, killed
and replaced by the server when it runs past the limit. A thread could not be
stopped. PDF exports queue for all workers but one, so TeX never holds them all; a
worker's TeX run (its own process group) ends with the worker, at SIGTERM, when the
server stops or dies. Starlette and uvicorn (the ``web`` extra) are imported only here, on use.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Mapping

from symattn.input.errors import LimitError, SpecError, SymattnError, shown
from symattn.input.limits import BODY_BYTES, GRACE_SECONDS, REQUEST_SECONDS, WAITING, WORKERS

WEB_EXTRA = 'symattn serve needs the web extra (Starlette and uvicorn); install it with: pip install "symattn[web]"'
SPEC_SOURCE, CLAIMS_SOURCE, REQUEST_SOURCE = "spec", "claims", "request"

RENDER_FORMATS = ("html", "markdown", "latex")
EXPORT_FORMATS = ("markdown", "latex", "pdf", "html", "toml")
REPORT_EXPORT_FORMATS = ("markdown", "latex", "pdf", "html", "text", "json")
_SUFFIX = {"markdown": "md", "latex": "tex", "pdf": "pdf", "html": "html", "toml": "toml", "text": "txt",
           "json": "json"}
_MEDIA = {"markdown": "text/markdown; charset=utf-8", "latex": "application/x-tex; charset=utf-8",
          "pdf": "application/pdf", "html": "text/html; charset=utf-8", "toml": "application/toml; charset=utf-8",
          "text": "text/plain; charset=utf-8", "json": "application/json"}


class WebExtraMissing(SymattnError, ImportError):
    """Starlette or uvicorn is not installed."""


class ServeError(SymattnError, ValueError):
    """symattn serve cannot start as asked (address, port)."""


# --- the work, done in a worker process ---------------------------------------

def _reader(source: str):
    from symattn.input.spec import _Reader
    return _Reader(source)


def _request(body: Any, allowed: tuple[str, ...], required: tuple[str, ...] = ("spec",)) -> dict[str, Any]:
    from symattn.input.spec import check_keys
    reader = _reader(REQUEST_SOURCE)
    if not isinstance(body, Mapping):
        raise reader.error(None, "expected a JSON object")
    check_keys(reader, body, allowed)
    for key in required:
        if key not in body:
            raise reader.error(key, "missing")
    return dict(body)


def _spec(raw: Any):
    from symattn.input.spec import spec_from_mapping
    return spec_from_mapping(raw, SPEC_SOURCE)


def _flag(body: Mapping[str, Any], key: str, default: bool) -> bool:
    from symattn.input.spec import _brief
    value = body.get(key, default)
    if not isinstance(value, bool):
        raise _reader(REQUEST_SOURCE).error(key, f"expected true or false, got {_brief(value)}")
    return value


def _is_text(value: Any) -> bool:
    # a JSON number comes as its text (FloatText, a str) so that 0.1 stays one tenth: it is not a string
    from symattn.input.spec import FloatText
    return isinstance(value, str) and not isinstance(value, FloatText)


def _derivation(spec: Any) -> tuple[Any, Any]:
    """The derivation and the exact model it was derived from (of any kind: compute takes each)."""
    from symattn.api import Result
    result = Result(spec)
    return result.derivation, result.model


def render_task(body: Any) -> dict[str, Any]:
    """POST /api/render: the derivation as an HTML fragment (or Markdown, LaTeX) and its intermediates."""
    from symattn.rendering.html import markdown_to_html
    from symattn.derivation.intermediates import MAX_DIGITS, compute
    from symattn.rendering.renderer import render
    from symattn.input.spec import parse_index
    reader = _reader(REQUEST_SOURCE)
    body = _request(body, ("spec", "format", "compute", "exact", "digits"))
    fmt = reader.choice(body.get("format", "html"), "format", RENDER_FORMATS)
    digits = parse_index(body.get("digits", 15))
    if digits is None or not 1 <= digits <= MAX_DIGITS:
        raise reader.error("digits", f"expected an integer from 1 to {MAX_DIGITS}")
    spec = _spec(body["spec"])
    derivation, model = _derivation(spec)
    out: dict[str, Any] = {"lang": derivation.lang}
    if fmt == "html":
        out["html"], out["title"] = markdown_to_html(render(derivation, "markdown"))
    else:
        out["text"] = render(derivation, fmt)
    if _flag(body, "compute", True):
        # closed forms are most of compute's time (an 8×8 spec: 0.2 s), so they are asked for
        out["compute"] = compute(spec, model, digits, exact=_flag(body, "exact", False))
    return out


def _claims(spec: Any, raw: Any):
    from symattn.input.claims import claims_from_mapping
    return claims_from_mapping({"claims": raw}, CLAIMS_SOURCE, spec=spec)


def check_task(body: Any) -> dict[str, Any]:
    """POST /api/check: the verdicts (report_data, with 0-based places) and the report as an HTML fragment."""
    from symattn.checking.checker import check, report_data
    from symattn.rendering.html import markdown_to_html
    from symattn.rendering.renderer import render_report
    body = _request(body, ("spec", "claims", "html"), ("spec", "claims"))
    spec = _spec(body["spec"])
    report = check(spec, _claims(spec, body["claims"]))
    data = report_data(report)
    # where each verdict stands, 0-based, so the page finds its box without matching labels
    data["places"] = [[v.claim.quantity, v.claim.row, v.claim.col] for v in report.results]
    if _flag(body, "html", True):
        data["html"], _ = markdown_to_html(render_report(report, "markdown"))
    data["lang"] = report.lang
    return data


def export_task(body: Any, tex: bool = False) -> tuple[bytes, str, str]:
    """POST /api/export: (content, media type, file name) of a derivation, a report or the spec.

    ``tex``: the server sent it as a PDF export (:func:`is_pdf_export`), under its limit on TeX runs.
    """
    reader = _reader(REQUEST_SOURCE)
    body = _request(body, ("spec", "format", "what", "claims"), ("spec", "format"))
    what = reader.choice(body.get("what", "derivation"), "what", ("derivation", "report"))
    formats = EXPORT_FORMATS if what == "derivation" else REPORT_EXPORT_FORMATS
    fmt = reader.choice(body["format"], "format", formats)
    if (fmt == "pdf") != tex:
        raise RuntimeError("a PDF export must come as the task export-pdf, and only a PDF export")
    spec = _spec(body["spec"])
    name = "symattn" if what == "derivation" else "symattn-check"
    if fmt == "toml":
        content: str | bytes = spec_toml(body["spec"])
    elif what == "derivation":
        content = _export_derivation(spec, fmt)
    else:
        if "claims" not in body:
            raise reader.error("claims", "missing (a report needs claims)")
        content = _export_report(spec, body["claims"], fmt)
    data = content.encode("utf-8") if isinstance(content, str) else content
    return data, _MEDIA[fmt], f"{name}.{_SUFFIX[fmt]}"


def _export_derivation(spec: Any, fmt: str) -> str | bytes:
    from symattn.rendering.renderer import render
    derivation, _ = _derivation(spec)
    if fmt == "html":
        from symattn.rendering.html import derivation_page
        return derivation_page(derivation)
    if fmt == "pdf":
        return _pdf(render(derivation, "latex", standalone=True), derivation.lang, spec.engine)
    return render(derivation, fmt, standalone=fmt == "latex")  # a LaTeX download is a whole document


def _export_report(spec: Any, claims: Any, fmt: str) -> str | bytes:
    from symattn.checking.checker import check, report_data
    from symattn.rendering.renderer import render_report
    report = check(spec, _claims(spec, claims))
    if fmt == "json":
        return json.dumps(report_data(report), ensure_ascii=False, indent=2) + "\n"
    if fmt == "html":
        from symattn.rendering.html import report_page
        return report_page(report)
    if fmt == "pdf":
        return _pdf(render_report(report, "latex", standalone=True), report.lang, report.engine)
    return render_report(report, fmt, standalone=fmt == "latex")


def _pdf(tex: str, lang: str, engine: str | None) -> bytes:
    # TeX has its own time limit (limits.LATEX_SECONDS); the request's clock stops while it runs,
    # as the CLI's does
    from symattn.rendering.pdf import latex_to_pdf
    import signal
    remaining, interval = signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        return latex_to_pdf(tex, engine=engine, lang=lang)
    finally:
        if remaining:
            signal.setitimer(signal.ITIMER_REAL, remaining, interval)


def parse_task(body: Any) -> dict[str, Any]:
    """POST /api/parse: a TOML spec (or claims file) read as the spec reader reads files, then checked.

    ``{"toml": text, "name": file name}`` in; ``{"spec": {…}}`` out, with
    ``"claims"`` when the file has a claims table. Nothing in the text is run.
    """
    from symattn.input.spec import parse_text
    reader = _reader(REQUEST_SOURCE)
    body = _request(body, ("toml", "name"), ("toml",))
    text = body["toml"]
    if not _is_text(text):
        raise reader.error("toml", "expected the text of a TOML file")
    name = body.get("name", "<pasted>")
    if not _is_text(name) or not name.strip() or len(name) > 200:
        raise reader.error("name", "expected a file name")
    name = name.replace("\\", "/").rsplit("/", 1)[-1] or "<pasted>"
    data = parse_text(text.lstrip("\ufeff"), name)
    if "spec" in data and isinstance(data.get("spec"), str):
        raise _reader(name).error("spec", "a spec given by path cannot be opened in the page; "
                                          "open the spec file, or put its keys in this file")
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


TASKS = {"render": render_task, "check": check_task, "export": export_task,
         "export-pdf": lambda body: export_task(body, tex=True), "parse": parse_task}


# --- the spec as TOML ------------------------------------------------------------

# keys whose values are text: a label "1" must stay a string; elsewhere a number's text is written bare
_TEXT_KEYS = {"title", "tokens", "key_tokens", "lang", "rounding", "expand", "softmax", "notation", "paper", "engine",
              "cjk_font"}


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
    from symattn.input.spec import parse_text, spec_from_mapping
    try:
        return spec_from_mapping(parse_text(text, SPEC_SOURCE), SPEC_SOURCE) == \
            spec_from_mapping(spec, SPEC_SOURCE)
    except SymattnError:
        return False


# --- running one task, in the worker -------------------------------------------

def run_task(name: str, body: Any, seconds: float) -> tuple[str, Any]:
    """("ok", result) or ("error", (status, message, where)): never raises for bad input."""
    from symattn.input.limits import deadline
    from symattn.rendering.pdf import TexTimeLimit
    start = time.monotonic()
    try:
        with deadline(seconds, REQUEST_SOURCE):
            return "ok", TASKS[name](body)
    except TexTimeLimit as exc:
        return "error", (422, str(exc), None)
    except SymattnError as exc:
        if isinstance(exc, LimitError) and time.monotonic() - start >= seconds:
            return "error", (422, str(exc), None)
        return "error", (400, str(exc), _where(exc))
    except RecursionError:
        return "error", (400, f"{REQUEST_SOURCE}: nested too deep", None)
    except Exception as exc:
        if time.monotonic() - start < seconds:
            raise  # a bug: the worker logs it and answers 500
        # the alarm landed where some code turned it into another error: it is still the time limit
        print(f"symattn serve: the time limit surfaced as {type(exc).__name__}: {shown(exc)}", file=sys.stderr,
              flush=True)
        return "error", (422, time_limit_message(seconds), None)


def time_limit_message(seconds: float) -> str:
    return f"{REQUEST_SOURCE}: took longer than {seconds:g} s (the time limit; raise it with --max-seconds)"


def _where(exc: SymattnError) -> dict[str, Any] | None:
    if isinstance(exc, SpecError):
        return {"source": exc.source, "key": exc.key, "position": list(exc.position)}
    return None


def _read_frame(stream) -> bytes | None:
    """One length-prefixed message from a pipe; None at its end."""
    head = stream.read(4)
    if len(head) < 4:
        return None
    size = int.from_bytes(head, "big")
    data = stream.read(size)
    return data if len(data) == size else None


def _write_frame(stream, data: bytes) -> None:
    stream.write(len(data).to_bytes(4, "big") + data)
    stream.flush()


def worker_main() -> None:
    """A worker process: tasks in on stdin, results out on stdout, one at a time, until stdin closes.

    SIGTERM (the server stopping, or dying: see :func:`_end_with_parent`) kills its TeX run first.
    """
    import pickle
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's to handle; it ends us
    signal.signal(signal.SIGTERM, _terminate)
    _end_with_parent()
    channel_in, channel_out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the channel
    _warm()
    while True:
        frame = _read_frame(channel_in)
        if frame is None:
            return
        name, body, seconds = pickle.loads(frame)
        try:
            result = run_task(name, body, seconds)
        except Exception:  # a bug in symattn: say so, keep serving
            import traceback
            traceback.print_exc()
            result = "error", (500, f"{REQUEST_SOURCE}: internal error in symattn; the server's log has the "
                                    "details", None)
        try:
            _write_frame(channel_out, pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
        except (OSError, ValueError):
            return


def _terminate(signum: int, frame: Any) -> None:
    from symattn.rendering.pdf import end_tex
    end_tex()  # first, whatever the exit below meets on its way
    raise SystemExit(128 + signum)


def _end_with_parent() -> None:
    """Linux: SIGTERM when the server dies, however it dies, so that no TeX run outlives it."""
    import ctypes
    import signal
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # elsewhere the server's own stop ends us; an orphan ends when stdin does


def _warm() -> None:
    """Import and compile what a request needs before the first one comes (templates, SymPy)."""
    from symattn.input import builtin
    from symattn.input.spec import read_table
    try:
        raw = read_table(builtin.example_path(builtin.DEFAULT, "zh"))
        render_task({"spec": raw})
        check_task({"spec": raw, "claims": {"sqrt_dk": "1.414"}})
    except SymattnError:  # pragma: no cover - the built-in example is valid
        pass


# --- the worker pool, on the server's side -----------------------------------------

class Failure(Exception):
    """A request that ends in an HTTP error: status, message, where."""

    def __init__(self, status: int, message: str, where: Any = None):
        super().__init__(message)
        self.status, self.message, self.where = status, message, where


# what a worker process runs (tests swap in a worker whose TeX runs are slow)
WORKER_CODE = "from symattn.web.serve import worker_main; worker_main()"


class _Worker:
    """One worker process (``python -c``, so that nothing of the server's state or main module is copied)."""

    def __init__(self) -> None:
        import os
        import subprocess
        from pathlib import Path
        package_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
        # its own session: Ctrl-C in the terminal reaches the server only, which ends the workers
        self.process = subprocess.Popen([sys.executable, "-c", WORKER_CODE],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True,
                                        start_new_session=True)

    def exchange(self, message: bytes) -> bytes | None:
        """Send a task and wait for its result (in a thread: both block)."""
        _write_frame(self.process.stdin, message)
        return _read_frame(self.process.stdout)

    def end(self) -> None:
        """Kill it now, and its TeX run with it (TeX has a process group of its own, which a kill misses)."""
        import os
        import signal
        if self.process.poll() is None:
            try:
                # stopped, it can neither start nor reap a child while we kill them
                os.kill(self.process.pid, signal.SIGSTOP)
                for child in _children(self.process.pid):
                    _kill_group_of(child)
            except ProcessLookupError:
                pass
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def close(self, seconds: float = 2.0) -> None:
        """Ask it to stop (end of input; SIGTERM, which ends a TeX run too), then make sure."""
        import subprocess
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.terminate()
            self.process.wait(seconds)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.end()


def _children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux; elsewhere none are known, and a worker's SIGTERM must do)."""
    import os
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found = []
    for thread in threads:
        try:
            with open(f"/proc/{pid}/task/{thread}/children") as fh:
                found += [int(p) for p in fh.read().split()]
        except OSError:
            pass
    return found


def _kill_group_of(pid: int) -> None:
    """Kill a worker's child (latexmk) and the process group it leads; the worker is stopped meanwhile."""
    import os
    import signal
    for kill, target in ((os.killpg, pid), (os.kill, pid)):  # os.kill too: a child not yet in its own group
        try:
            kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class _Pool:
    """WORKERS processes, each doing one task at a time; one that runs past its time is killed and replaced.

    PDF exports take a TeX slot as well as a worker, and there is one slot fewer than workers: however
    many exports are asked for, and however long their TeX runs, one worker stays free for the rest.
    """

    def __init__(self, size: int = WORKERS, seconds: float = REQUEST_SECONDS):
        from concurrent.futures import ThreadPoolExecutor
        if size < 2:
            raise ValueError("a pool needs two workers at least: one of them never runs TeX")
        self.size, self.seconds = size, seconds
        self.waiting = 0
        self.idle = None
        self.tex_slots = None
        # one blocking exchange per busy worker: never on the event loop
        self.threads = ThreadPoolExecutor(max_workers=size, thread_name_prefix="symattn-worker")
        self.workers: list[_Worker] = []

    def _spawn(self) -> _Worker:
        worker = _Worker()
        self.workers.append(worker)
        return worker

    def _replace(self, worker: _Worker) -> _Worker:
        worker.end()
        self.workers.remove(worker)
        return self._spawn()

    async def start(self) -> None:
        import asyncio
        self.idle = asyncio.Queue()
        self.tex_slots = asyncio.Semaphore(self.size - 1)
        for _ in range(self.size):
            self.idle.put_nowait(self._spawn())

    async def stop(self) -> None:
        import asyncio
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(None, w.close) for w in self.workers))
        self.workers.clear()
        self.threads.shutdown(wait=False, cancel_futures=True)

    async def run(self, name: str, body: Any, extra_seconds: float = 0.0, tex: bool = False) -> Any:
        """The result of a task; ``tex``: it runs TeX, so it waits for a TeX slot first (exports queue)."""
        if self.waiting >= WAITING:
            raise Failure(503, f"{REQUEST_SOURCE}: the server is busy ({WAITING} requests waiting); try again")
        self.waiting += 1
        try:
            if tex:
                await self.tex_slots.acquire()
            try:
                worker = await self.idle.get()
            except BaseException:
                if tex:
                    self.tex_slots.release()
                raise
        finally:
            self.waiting -= 1
        try:
            return await self._exchange(worker, name, body, extra_seconds)
        finally:
            if tex:
                self.tex_slots.release()

    async def _exchange(self, worker: _Worker, name: str, body: Any, extra_seconds: float) -> Any:
        import asyncio
        import pickle
        replace = True
        try:
            message = pickle.dumps((name, body, self.seconds), protocol=pickle.HIGHEST_PROTOCOL)
            loop = asyncio.get_running_loop()
            frame = await asyncio.wait_for(loop.run_in_executor(self.threads, worker.exchange, message),
                                           self.seconds + extra_seconds + GRACE_SECONDS)
            if frame is None:
                raise Failure(503, f"{REQUEST_SOURCE}: the computation stopped unexpectedly (out of memory?); "
                                   "try again")
            status, result = pickle.loads(frame)
            replace = False
        except asyncio.TimeoutError:
            raise Failure(422, time_limit_message(self.seconds)) from None
        except OSError:
            raise Failure(503, f"{REQUEST_SOURCE}: the computation stopped unexpectedly; try again") from None
        finally:
            # a worker that ran over, died, or whose client went away mid-task is replaced
            self.idle.put_nowait(self._replace(worker) if replace else worker)
        if status == "error":
            raise Failure(*result)
        return result


# --- the web application -----------------------------------------------------------

def _web():
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise WebExtraMissing(WEB_EXTRA) from None


def _ui_strings() -> dict[str, dict[str, Any]]:
    """What the page says, per language: its own [ui] phrases and the report's words for verdicts."""
    from symattn.input.languages import languages
    from symattn.rendering.renderer import load_language
    out = {}
    for lang in languages():
        prose = load_language(lang)
        out[lang] = {section: prose[section] for section in ("ui", "verdict", "quantity", "slip")}
        out[lang]["report"] = {k: prose["report"][k] for k in ("expected", "carried_from", "truncated", "masked", "sep")}
    return out


def _examples() -> list[dict[str, Any]]:
    from symattn.input import builtin
    from symattn.input.spec import read_table
    out = []
    for name in builtin.names():
        for path in sorted(builtin.EXAMPLES.glob(f"{name}.*.toml")):
            data = read_table(path)
            out.append({"name": name, "lang": path.name.split(".")[1], "title": data.get("title", name),
                        "spec": data})
    return out


def _has_tex() -> bool:
    import shutil
    return shutil.which("latexmk") is not None and (shutil.which("xelatex") or shutil.which("pdflatex")) is not None


def _script_json(data: Any) -> str:
    # safe inside <script type="application/json">: no "</script>", no "<!--"
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


def page_html(initial: Mapping[str, Any], lang: str = "zh", given: bool = False) -> str:
    """The page, in the language of the spec it opens with (``given``: named on the command line, so it
    wins over what the browser kept from last time)."""
    import markupsafe
    from symattn.input.choices import EXPANDS, MASKS, ROUNDINGS
    from symattn.rendering.html import katex_version
    from symattn.input.languages import languages
    from symattn.rendering.renderer import template_environment
    strings = _ui_strings()
    boot = {"initial": initial, "given": given, "strings": strings, "languages": languages(), "tex": _has_tex(),
            "choices": {"rounding": ROUNDINGS, "expand": EXPANDS, "mask": MASKS},
            "limits": {"body": BODY_BYTES}}
    template = template_environment(autoescape=True).get_template("app.html.j2")
    return template.render(lang=lang, html_lang={"zh": "zh-CN"}.get(lang, lang), ui=strings[lang]["ui"],
                           languages=languages(), strings=strings, boot=markupsafe.Markup(_script_json(boot)),
                           katex_version=katex_version(), tex=boot["tex"],
                           choices=boot["choices"])


_SECURITY_HEADERS = {
    # everything comes from this server: no CDN, no inline script; KaTeX sets inline styles
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                               "img-src 'self' data:; font-src 'self'; connect-src 'self'; object-src 'none'; "
                               "base-uri 'none'; frame-ancestors 'none'; form-action 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}


def create_app(initial: Mapping[str, Any] | None = None, seconds: float | None = None, *,
               workers: int = WORKERS, hosts: tuple[str, ...] | None = ("127.0.0.1", "localhost", "::1")):
    """The Starlette application. ``initial``: the spec mapping the page opens with (default: the
    built-in example). ``hosts``: the names the Host header may give (None: any, for --allow-remote);
    a page on another name (DNS rebinding) gets 421."""
    _web()
    from contextlib import asynccontextmanager
    from pathlib import Path

    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse, JSONResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    from symattn.input import builtin
    from symattn.rendering.html import VENDOR
    from symattn.input.spec import read_table

    given = initial is not None
    if initial is None:
        initial = read_table(builtin.example_path(builtin.DEFAULT, "zh"))
    lang = initial.get("lang") if initial.get("lang") in ("zh", "en") else "en"
    pool = _Pool(workers, seconds or REQUEST_SECONDS)
    cache: dict[str, Any] = {}

    def failure(status: int, message: str, where: Any = None) -> Response:
        return JSONResponse({"error": message, "where": where}, status_code=status)

    async def body_of(request) -> Any:
        from symattn.input.spec import parse_text
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json":
            # a cross-site form cannot send JSON without asking first (CORS), which this server never allows
            raise Failure(415, f"{REQUEST_SOURCE}: expected a JSON body (Content-Type: application/json)")
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
            print(f"symattn serve: {request.method} {request.url.path}: the client went away before sending the "
                  f"whole body ({len(data)} bytes came)", file=sys.stderr, flush=True)
            raise Failure(400, f"{REQUEST_SOURCE}: the body ended early") from None
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Failure(400, f"{REQUEST_SOURCE}: not UTF-8 text (byte {exc.start + 1})") from None
        try:
            # numbers keep their text, as in a spec file: 0.1 is one tenth, never a float
            parsed = parse_text(text, REQUEST_SOURCE, json_=True)
        except SymattnError as exc:
            raise Failure(400, str(exc), _where(exc)) from None
        return parsed

    def api(name: str, respond):
        async def endpoint(request):
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
        if "page" not in cache:
            cache["page"] = page_html(initial, lang, given)
        return HTMLResponse(cache["page"], headers={"cache-control": "no-cache"})

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
        Route("/api/examples", examples),
        Mount("/static", StaticFiles(directory=str(here))),
        Mount("/katex", StaticFiles(directory=str(VENDOR))),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.pool = pool
    return _Guard(app, hosts)


def _too_large() -> str:
    return f"{REQUEST_SOURCE}: body larger than {BODY_BYTES // 1024} KiB (the limit)"


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
                message["headers"] = list(message.get("headers", [])) + \
                    [(k.encode(), v.encode()) for k, v in _SECURITY_HEADERS.items()]
            await send(message)

        if self.hosts is not None:
            host = dict(scope["headers"]).get(b"host", b"").decode("latin-1").lower()
            name = host.rsplit("]", 1)[0].lstrip("[") if host.startswith("[") else host.split(":")[0]
            if name not in self.hosts:
                from starlette.responses import JSONResponse
                response = JSONResponse({"error": f"{REQUEST_SOURCE}: host {shown(host)!r} is not this server's",
                                         "where": None}, status_code=421)
                return await response(scope, receive, secured)
        return await self.app(scope, receive, secured)


# --- the command ------------------------------------------------------------------

def _is_loopback(host: str) -> bool:
    import ipaddress
    import socket
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        found = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except (OSError, UnicodeError):
        raise ServeError(f"--host {shown(host)}: cannot resolve this name") from None
    return bool(found) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in found)


def _listen(host: str, port: int):
    import socket
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise ServeError(f"--host {shown(host)}: cannot resolve this name") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ServeError(f"--port {port}: cannot listen on {shown(host)}: {exc.strerror or exc}") from None
    sock.set_inheritable(False)
    return sock


def _initial(path: str | None) -> dict[str, Any] | None:
    """The spec the page opens with, checked now so that a bad file stops the command (exit 2)."""
    if path is None:
        return None
    from symattn.input.spec import read_table, spec_from_mapping
    data = read_table(path)
    spec_from_mapping(data, path)
    return data


def serve(args) -> int:
    """Run the server until Ctrl-C. Prints the page's address first."""
    host = args.host
    if not host or not host.strip():
        raise ServeError("--host: empty")
    loopback = _is_loopback(host)
    if not loopback and not args.allow_remote:
        raise ServeError(f"--host {shown(host)} is not a loopback address: anyone who can reach it could use the "
                         "page; add --allow-remote to listen there anyway")
    _web()
    import uvicorn
    initial = _initial(args.spec)
    seconds = args.request_seconds or REQUEST_SECONDS
    sock = _listen(host, args.port)
    port = sock.getsockname()[1]
    shown_host = f"[{host.strip('[]')}]" if ":" in host else host
    url = f"http://{shown_host}:{port}/"
    if not loopback:
        print(f"symattn: warning: listening on {shown(host)}, which is not loopback: anyone who can reach it can "
              "use the page (no login, no encryption)", file=sys.stderr, flush=True)
    hosts = None if not loopback else tuple({"127.0.0.1", "localhost", "::1", host.strip("[]")})
    app = create_app(initial, seconds, hosts=hosts)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                                           timeout_graceful_shutdown=3))
    print(f"symattn serve: {url} (Ctrl-C stops)", flush=True)
    if args.open:
        _open_when_ready(server, url)
    server.run(sockets=[sock])
    return 0


def _open_when_ready(server, url: str) -> None:
    import threading
    import webbrowser

    def wait() -> None:
        for _ in range(600):
            if server.started:
                webbrowser.open(url)
                return
            time.sleep(0.05)

    threading.Thread(target=wait, name="symattn-open", daemon=True).start()
