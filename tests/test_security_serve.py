"""symattn serve under attack: TeX never holds every worker, no TeX run outlives its server or its time
limit, the time limit is always 422, and housekeeping (421's headers, a client gone mid-body, no Python
type names in messages).

A slow PDF export is real TeX: the workers here typeset a document that loops forever
(``\\loop\\iftrue\\repeat``) in place of the derivation, through the page's own request."""

from __future__ import annotations

import json
import os
import pickle
import re
import select
import shutil
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="starlette (the web extra) is needed for symattn serve")
pytest.importorskip("uvicorn", reason="uvicorn (the web extra) is needed for symattn serve")
httpx = pytest.importorskip("httpx", reason="httpx drives the API tests")

from starlette.testclient import TestClient  # noqa: E402

import symattn.web.pool  # noqa: E402
import symattn.web.tasks  # noqa: E402
from symattn.input.errors import LimitError  # noqa: E402
from symattn.web.app import SECURITY_HEADERS, create_app  # noqa: E402
from symattn.web.tasks import export_task  # noqa: E402

from .conftest import wait_until  # noqa: E402
from .test_serve import _children, _start, _stop, as_json, seed_raw  # noqa: E402

LOOP = "\\documentclass{article}\n\\begin{document}\n\\loop\\iftrue\\repeat\n\\end{document}\n"


def looping_worker(tex_seconds: float | None = None) -> str:
    """Worker code whose PDF exports typeset LOOP (for real, with latexmk) instead of the derivation."""
    limit = "" if tex_seconds is None else f", seconds={tex_seconds}"
    return (
        "import symattn.rendering.pdf as pdf; typeset = pdf.latex_to_pdf; "
        f"pdf.latex_to_pdf = lambda tex, **kw: typeset({LOOP!r}, **kw{limit}); "
        "from symattn.web.pool import worker_main; worker_main()"
    )


def needs_tex() -> None:
    if not (shutil.which("latexmk") and shutil.which("pdflatex")):
        pytest.skip("latexmk and pdflatex not installed (TeX Live)")


def export_body() -> dict:
    raw = as_json(seed_raw("en"))
    raw["tokens"], raw["focus"] = ["cat", "eats", "it"], "it"  # pdflatex, not xelatex
    return {"spec": raw, "format": "pdf"}


def group_members(pgid: int) -> list[str]:
    """The live processes (not zombies) of a process group, by name."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        state, _, group = stat[stat.rindex(")") + 2 :].split()[:3]
        if int(group) == pgid and state != "Z":
            found.append(name)
    return found


def tex_groups(worker_pids: list[int]) -> dict[int, int]:
    """{worker pid: the process group of its TeX run}, for the workers whose TeX engine is running now."""
    out = {}
    for worker in worker_pids:
        for child in _children(worker):  # latexmk, which leads its group
            if "pdflatex" in group_members(child):
                out[worker] = child
    return out


def wait_for(condition, seconds: float, what: str):
    value = wait_until(condition, seconds)
    if not value:
        pytest.fail(f"timed out waiting for {what}")
    return value


def gone(pgid: int, seconds: float = 5.0) -> bool:
    return wait_until(lambda: not group_members(pgid), seconds)


# --- one worker stays free of TeX -------------------------------------------------------


def test_two_pdf_exports_leave_a_worker_for_rendering(monkeypatch):
    needs_tex()
    monkeypatch.setattr(symattn.web.pool, "WORKER_CODE", looping_worker(tex_seconds=5))
    with TestClient(create_app(hosts=("testserver",))) as client, ThreadPoolExecutor(2) as threads:
        pool = client.app.state.pool
        render = {"spec": seed_raw(), "compute": False}
        # both workers warm (one request each), so that a render's time is its own
        assert [
            f.result().status_code for f in [threads.submit(client.post, "/api/render", json=render) for _ in range(2)]
        ] == [200, 200]
        exports = [threads.submit(client.post, "/api/export", json=export_body()) for _ in range(2)]
        first = wait_for(lambda: tex_groups([w.process.pid for w in pool.workers]), 60, "the first TeX run")
        response = client.post("/api/render", json=render)
        assert response.status_code == 200 and response.json()["lang"] == "zh"
        # answered while the first export's TeX still loops (for 5 s), and the second waits its turn
        assert "pdflatex" in group_members(*first.values()) and not any(f.done() for f in exports)
        # the second export waits for the first: never two TeX runs at once, so never both workers
        seen = set(first.values())
        while not all(f.done() for f in exports):
            running = tex_groups([w.process.pid for w in pool.workers])
            assert len(running) <= 1, running
            seen |= set(running.values())
            time.sleep(0.05)
        results = [f.result() for f in exports]
    assert [r.status_code for r in results] == [422, 422]
    assert [r.json() for r in results] == [
        {"error": "pdflatex took longer than 5 s (the time limit of a TeX run)", "where": None}
    ] * 2
    assert len(seen) == 2 and all(gone(pgid) for pgid in seen)  # each killed at its time limit


def test_tex_runs_only_as_a_pdf_export():
    # the worker refuses TeX it was not sent as "export-pdf", for which the server holds a TeX slot
    with pytest.raises(RuntimeError):
        export_task(export_body())
    with pytest.raises(RuntimeError):
        export_task({"spec": seed_raw(), "format": "markdown"}, tex=True)


# --- no TeX outlives its time limit, its worker or its server ---------------------------------


def test_time_limit_kills_the_whole_tex_group(monkeypatch):
    needs_tex()
    import symattn.rendering.pdf as pdf

    started = []

    class Recorded(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self.pid)

    monkeypatch.setattr(pdf.subprocess, "Popen", Recorded)
    with pytest.raises(pdf.TexTimeLimit) as err:
        pdf.latex_to_pdf(LOOP, seconds=2)
    assert str(err.value) == "pdflatex took longer than 2 s (the time limit of a TeX run)"
    assert len(started) == 1 and gone(started[0]) and pdf._RUNNING == []  # SIGKILL takes a moment to land


def test_a_stuck_worker_is_killed_with_its_tex(monkeypatch):
    needs_tex()
    monkeypatch.setattr(symattn.web.pool, "WORKER_CODE", looping_worker())
    worker = symattn.web.pool.Worker()
    with ThreadPoolExecutor(1) as threads:
        answer = threads.submit(worker.exchange, pickle.dumps(("export-pdf", export_body(), 10.0)))
        pgid = wait_for(lambda: tex_groups([worker.process.pid]), 60, "the TeX run")[worker.process.pid]
        os.kill(worker.process.pid, signal.SIGSTOP)  # deaf to SIGTERM, as a worker stuck past its limit
        worker.end()
        assert answer.result(10) is None
    assert worker.process.returncode == -signal.SIGKILL
    assert gone(pgid)


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_no_tex_outlives_the_server(tmp_path, how):
    """Ctrl-C, a polite kill, or a hard one (then the workers learn of it from the kernel)."""
    needs_tex()
    launcher = (
        "-c",
        f"import sys, symattn.web.pool as s; s.WORKER_CODE = {looping_worker()!r}; "
        "from symattn.cli.commands import main; sys.exit(main(sys.argv[1:]))",
    )
    process, url, _ = _start(cwd=tmp_path, launcher=launcher)
    workers = []
    try:
        with httpx.Client(base_url=url, timeout=120) as http, ThreadPoolExecutor(1) as threads:
            answer = threads.submit(lambda: http.post("/api/export", json=export_body()))
            workers = wait_for(
                lambda: _children(process.pid) if len(_children(process.pid)) == 2 else None, 60, "the workers"
            )
            (pgid,) = wait_for(lambda: tex_groups(workers), 60, "the TeX run").values()
            start = time.monotonic()
            if how == "SIGINT":
                _stop(process)  # which also checks that the workers went with it
            else:
                process.send_signal(getattr(signal, how))
                process.wait(15)
            assert gone(pgid, 10), group_members(pgid)
            assert time.monotonic() - start < 10
            try:
                answer.result(30)
            except httpx.HTTPError:
                pass  # the server went before it could answer
    finally:
        if process.poll() is None:
            process.kill()
        if not process.stdout.closed:
            _stop(process)
    for pid in workers:  # a hard kill too leaves no worker behind
        assert wait_for(
            lambda pid=pid: (
                not Path(f"/proc/{pid}").exists()
                or Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
            ),
            10,
            "the workers",
        )


# --- the time limit is 422 wherever it lands; a bug is 500 without a type name --------------------


def failing_worker() -> str:
    # render: with "bug", fails at once; otherwise waits for the alarm and turns it into a KeyError,
    # as the backward pass's caches once did
    return (
        "import time, symattn.web.pool as p, symattn.web.tasks as s\n"
        "from symattn.input.errors import LimitError\n"
        "def render(body):\n"
        "    if 'bug' in body:\n"
        "        return {}['bug']\n"
        "    try:\n"
        "        while True: time.sleep(0.01)\n"
        "    except LimitError:\n"
        "        return {}['cache']\n"
        "s.TASKS['render'] = render\n"
        "p.worker_main()\n"
    )


def test_time_limit_that_surfaces_as_another_error_is_still_422(monkeypatch, capfd):
    monkeypatch.setattr(symattn.web.pool, "WORKER_CODE", failing_worker())
    with TestClient(create_app(hosts=("testserver",), seconds=0.5)) as client:
        late = client.post("/api/render", json={"spec": {}})
        bug = client.post("/api/render", json={"bug": True})
    assert (late.status_code, late.json()) == (
        422,
        {"error": "request: took longer than 0.5 s (the time limit; raise it with --max-seconds)", "where": None},
    )
    assert (bug.status_code, bug.json()) == (
        500,
        {"error": "request: internal error in symattn; the server's log has the details", "where": None},
    )
    log = capfd.readouterr().err  # the workers' stderr is the server's log
    assert "symattn serve: the time limit surfaced as KeyError: 'cache'\n" in log
    assert "KeyError: 'bug'" in log  # the bug's traceback, for whoever reads the log


def test_run_task_maps_a_late_error_to_the_time_limit(monkeypatch):
    def swallowing(body):
        try:
            while True:
                time.sleep(0.01)
        except LimitError:
            raise KeyError("cache") from None

    monkeypatch.setitem(symattn.web.tasks.TASKS, "render", swallowing)
    assert symattn.web.tasks.run_task("render", {}, 0.2) == (
        "error",
        (422, "request: took longer than 0.2 s (the time limit; raise it with --max-seconds)", None),
    )
    monkeypatch.setitem(symattn.web.tasks.TASKS, "render", lambda body: {}["bug"])
    with pytest.raises(KeyError):  # early: a bug, which the worker answers with 500
        symattn.web.tasks.run_task("render", {}, 5)


# --- housekeeping --------------------------------------------------------------------------


def test_421_carries_the_security_headers():
    with TestClient(create_app(), base_url="http://evil.example") as client:
        refused = client.get("/")
        served = client.get("/", headers={"host": "127.0.0.1"})
    assert refused.status_code == 421 and served.status_code == 200
    for name, value in SECURITY_HEADERS.items():
        assert refused.headers[name] == served.headers[name] == value, name


def test_a_client_gone_mid_body_is_one_line_in_the_log(tmp_path):
    process, url, _ = _start(cwd=tmp_path)
    try:
        host, port = re.fullmatch(r"http://([^:/]+):(\d+)/", url).groups()
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(
                b"POST /api/render HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b'Content-Length: 1000\r\n\r\n{"spec"'
            )
            time.sleep(0.3)
        time.sleep(0.3)
        assert (
            httpx.post(url + "api/render", json={"spec": seed_raw(), "compute": False}, timeout=30).status_code == 200
        )
        log = ""
        while select.select([process.stderr], [], [], 1.0)[0]:
            line = process.stderr.readline()
            if not line:
                break
            log += line
        assert (
            log == "symattn serve: POST /api/render: the client went away before sending the whole body "
            "(7 bytes came)\n"
        )
    finally:
        _stop(process)


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(hosts=("testserver",))) as c:
        yield c


WRONG_TYPES = [
    ({"spec": "S", "Q": 1.5}, "spec: Q: expected a matrix (a list of rows), got a number"),
    ({"spec": "S", "Q": None}, "spec: Q: expected a matrix (a list of rows), got null"),
    ({"spec": "S", "tokens": 1}, "spec: tokens: expected a list of labels, got a number"),
    (
        {"spec": "S", "decimals": {"weights": None}},
        "spec: decimals.weights: expected an integer from 0 to 50, got null",
    ),
    ({"spec": "S", "focus": None}, "spec: focus: no token labelled null; tokens are 小猫, 吃, 它"),
    ({"spec": "S", "backward": 2}, "spec: backward: expected a table, got a number"),
    ({"spec": "S", "compute": [1]}, "request: compute: expected true or false, got a list"),
    ({"spec": "S", "exact": None}, "request: exact: expected true or false, got null"),
    ({"spec": "S", "claims": {"rows": 1}}, "claims: claims.rows: expected a table of rows, got a number"),
    ({"spec": "S", "claims": None}, "claims: claims: expected a table of claims, got null"),
    (
        {"spec": "S", "claims": {"rows": {"它": {"exp": 2.5}}}},
        "claims: claims.rows.它.exp: expected a list, got a number",
    ),
    ({"toml": 1.5}, "request: toml: expected the text of a TOML file"),
    ({"toml": "", "name": 7}, "request: name: expected a file name"),
]


def _body(template: dict) -> tuple[str, dict]:
    body = dict(template)
    if body.get("spec") == "S":
        spec = as_json(seed_raw())
        for key in [k for k in body if k not in ("spec", "compute", "exact", "claims")]:
            spec[key] = body.pop(key)
        body["spec"] = spec
    path = "/api/parse" if "toml" in body else "/api/check" if "claims" in body else "/api/render"
    return path, body


@pytest.mark.parametrize("template, message", WRONG_TYPES)
def test_wrong_types_are_named_in_json_words(client, template, message):
    path, body = _body(template)
    response = client.post(path, json=body)
    assert response.status_code == 400
    assert response.json()["error"] == message


PYTHON_NAMES = re.compile(
    r"\b(FloatText|NoneType|dict|str|int|bool|tuple|float|Numeral|Fraction|Decimal|"
    r"Traceback|\w+Error)\b"
)


def test_no_python_type_names_in_any_message(client):
    values = [None, 1.5, 7, True, "x", [], {}, [[None]], [[1.5]], [[{}]], [None], {"a": None}]
    keys = [
        "title",
        "lang",
        "tokens",
        "focus",
        "Q",
        "K",
        "V",
        "scale",
        "rounding",
        "expand",
        "decimals",
        "key_tokens",
        "mask",
        "key_padding",
        "softmax",
        "X",
        "W_Q",
        "heads",
        "W_O",
        "subs",
        "notation",
        "paper",
        "engine",
        "cjk_font",
        "backward",
    ]
    seen = set()
    for value in values:
        bodies = [
            ("/api/render", {"spec": dict(as_json(seed_raw()), **{key: value}), "compute": False}) for key in keys
        ]
        bodies += [
            ("/api/render", {"spec": as_json(seed_raw()), key: value})
            for key in ("format", "compute", "exact", "digits")
        ]
        bodies += [
            ("/api/check", {"spec": as_json(seed_raw()), "claims": claims})
            for claims in (
                value,
                {"sqrt_dk": value},
                {"rows": value},
                {"rows": {"它": value}},
                {"weights": value},
                {"rows": {"它": {"exp": value}}},
            )
        ]
        bodies += [
            ("/api/export", {"spec": as_json(seed_raw()), "format": "markdown", key: value})
            for key in ("what", "format")
        ]
        bodies += [("/api/parse", {"toml": value}), ("/api/parse", {"toml": "", "name": value}), ("/api/render", value)]
        for path, body in bodies:
            response = client.post(
                path, content=json.dumps(body).encode(), headers={"content-type": "application/json"}
            )
            if response.status_code != 200:
                assert response.status_code == 400, (path, body, response.text)
                seen.add(response.json()["error"])
    assert len(seen) > 100
    assert [m for m in seen if PYTHON_NAMES.search(m)] == []


def test_hostile_request_text_is_answered_short_and_named(client):
    """Issue 28: a key given twice, a 200 KB claims key, a rounding no precision decides."""
    spec = as_json(seed_raw())
    response = client.post(
        "/api/render", content=b'{"spec": {}, "spec": {}}', headers={"content-type": "application/json"}
    )
    assert (response.status_code, response.json()["error"]) == (
        400,
        "request: the key 'spec' twice in one object; keep one",
    )
    response = client.post("/api/check", json={"spec": spec, "claims": {"s" * 200_000: "1"}})
    assert response.status_code == 400 and len(response.content) < 1000
    assert response.json()["where"] == {"source": "claims", "key": "claims." + "s" * 93 + "…", "position": []}
    tiny = {**spec, "softcap": "1e-30", "softmax": "stable"}  # z − max about 10^−(10^29): no digits to write
    response = client.post("/api/render", json={"spec": tiny})
    assert (response.status_code, response.json()["error"]) == (
        400,
        "spec: shifted[1][2] is below 10^-1000000 in size: it has no digits to show",
    )
