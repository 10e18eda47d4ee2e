"""Shared fixtures: the seed spec, real clients (KaTeX, TeX Live), golden files."""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

# One thread in each BLAS and OpenMP pool, in every xdist worker and every symattn it runs: the workers are
# the parallelism, one a core, and pools as wide as the machine in each of them only fought over the cores.
for _pool in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_pool, "1")

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

threadpool_limits(limits=1)  # pools loaded before this file was read

# The suite draws the same examples on every run: a flaky test is a failing test. To explore afresh (with
# the long fuzz run, say): HYPOTHESIS_PROFILE=explore pytest -m longfuzz
settings.register_profile("suite", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
KATEX_DIR = Path(__file__).resolve().parent / "katex"

SEED = {
    "tokens": ["小猫", "吃", "它"],
    "Q": [["1.0", "0.0"], ["0.0", "1.0"], ["0.9", "0.1"]],
    "K": [["1.0", "0.2"], ["0.1", "1.0"], ["0.8", "0.3"]],
    "V": [[10, 0], [0, 10], [1, 1]],
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--regen-golden", action="store_true", help="rewrite the golden files from the current output")


@pytest.fixture
def seed() -> dict:
    return {k: (list(v) if isinstance(v, list) else v) for k, v in SEED.items()}


@pytest.fixture
def golden(request: pytest.FixtureRequest):
    """Compare text with tests/golden/<name>; --regen-golden rewrites it."""

    def check(name: str, text: str) -> None:
        path = GOLDEN / name
        if request.config.getoption("--regen-golden"):
            path.write_text(text, encoding="utf-8", newline="\n")
            return
        expected = path.read_text(encoding="utf-8")
        if text != expected:
            diff = "".join(
                difflib.unified_diff(
                    expected.splitlines(True), text.splitlines(True), f"golden/{name}", "rendered", n=2
                )
            )
            pytest.fail(f"output differs from golden/{name} (run pytest --regen-golden to accept):\n{diff}")

    return check


# --- KaTeX -----------------------------------------------------------------

_DISPLAY = re.compile(r"^\$\$\n(.*?)\n\$\$$", re.S | re.M)
_INLINE = re.compile(r"(?<![\\$])\$(?!\$)((?:\\.|[^$\\])+?)\$")


def math_spans(markdown: str) -> list[dict]:
    """Every $$…$$ block and $…$ span of rendered Markdown."""
    spans = [{"tex": m.group(1), "display": True} for m in _DISPLAY.finditer(markdown)]
    rest = _DISPLAY.sub("", markdown)
    spans += [{"tex": m.group(1), "display": False} for m in _INLINE.finditer(rest)]
    return spans


@pytest.fixture(scope="session")
def katex():
    node = shutil.which("node")
    if not node or not (KATEX_DIR / "node_modules" / "katex").is_dir():
        pytest.skip("KaTeX not installed (run: npm ci --prefix tests/katex)")
    # one node for the session (a start costs a quarter of a second): a JSON list of spans per line
    process = subprocess.Popen(
        [node, str(KATEX_DIR / "check.js")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        cwd=KATEX_DIR,
    )
    assert process.stdin is not None and process.stdout is not None  # both piped

    def parse(markdown: str) -> list[tuple[str, str]]:
        spans = math_spans(markdown)
        assert spans, "no math found"
        process.stdin.write(json.dumps(spans) + "\n")
        process.stdin.flush()
        answer = process.stdout.readline()
        assert answer, f"KaTeX's node stopped (exit {process.poll()})"
        return [(s["tex"], err) for s, err in zip(spans, json.loads(answer)) if err]

    yield parse
    process.stdin.close()
    process.wait(timeout=30)


# --- TeX Live --------------------------------------------------------------


@pytest.fixture(scope="session")
def latex():
    def compile_(tex: str, engine: str, workdir: Path, boxes_checked: bool = True) -> Path:
        if not shutil.which(engine):
            pytest.skip(f"{engine} not installed (TeX Live)")
        src = workdir / "doc.tex"
        src.write_text(tex, encoding="utf-8")
        # \tracinglostchars=2 logs every glyph a font lacks, which we then fail on
        run = subprocess.run(
            [
                engine,
                "-interaction=nonstopmode",
                "-halt-on-error",
                "-jobname=doc",
                r"\tracinglostchars=2\relax\input{doc.tex}",
            ],
            cwd=workdir,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=300,
        )
        log = (workdir / "doc.log").read_text(encoding="utf-8", errors="replace")
        assert run.returncode == 0, f"{engine} failed:\n" + "\n".join(log.splitlines()[-40:])
        missing = [line for line in log.splitlines() if "Missing character" in line]
        assert not missing, f"{engine} dropped glyphs:\n" + "\n".join(missing)
        if boxes_checked:
            if "Rerun LaTeX" in log:  # longtable sets its columns from the last run's widths
                subprocess.run(run.args, cwd=workdir, capture_output=True, timeout=300, check=False)
                log = (workdir / "doc.log").read_text(encoding="utf-8", errors="replace")
            overfull = [m.group(0) for m in _OVERFULL.finditer(log)]
            assert not overfull, f"{engine}: overfull boxes:\n" + "\n".join(overfull)
        return workdir / "doc.pdf"

    return compile_


_OVERFULL = re.compile(r"Overfull \\([hv])box \(([\d.]+)pt too (?:wide|high)\)(?:.*? at lines? (\d+))?", re.MULTILINE)


def tex_bundles(documents: dict[str, str]) -> list[tuple[str, dict[str, range]]]:
    """Standalone documents with the same preamble, set one after another in one document each.

    A TeX start (its format, and ctex's CJK fonts under xelatex) costs more than a small body, and the suite
    sets hundreds of documents. Each body keeps its own preamble and sits in a group on pages of its own, so
    what it sets is what it sets alone. Returns each bundle's source and the source lines of each label."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for label, tex in documents.items():
        preamble, rest = tex.split("\\begin{document}", 1)
        body, _ = rest.rsplit("\\end{document}", 1)
        groups.setdefault(preamble, []).append((label, body))
    bundles = []
    for preamble, bodies in groups.items():
        source = preamble + "\\begin{document}"
        lines: dict[str, range] = {}
        for label, body in bodies:
            part = "\n\\clearpage\\begingroup\n" + body + "\n\\endgroup\n"
            first = source.count("\n") + 1
            source += part
            lines[label] = range(first, source.count("\n") + 2)
        bundles.append((source + "\\end{document}\n", lines))
    return bundles


@pytest.fixture(scope="session")
def latex_each(latex):
    """compile(documents, engine, workdir) -> each label's overfull boxes, as ("h" or "v", points).

    Documents that share a preamble compile as one (tex_bundles); a box TeX places by its source line goes to
    that line's label, one it does not place (an overfull page) to every label of its bundle."""

    def compile_(documents: dict[str, str], engine: str, workdir: Path) -> dict[str, list[tuple[str, float]]]:
        boxes: dict[str, list[tuple[str, float]]] = {label: [] for label in documents}
        for n, (source, lines) in enumerate(tex_bundles(documents)):
            folder = workdir / f"bundle{n}"
            folder.mkdir()
            try:
                latex(source, engine, folder, boxes_checked=False)
            except AssertionError as failure:
                log = (folder / "doc.log").read_text(encoding="utf-8", errors="replace")
                at = [int(m) for m in re.findall(r"^l\.(\d+)", log, re.MULTILINE)]
                named = [label for label, span in lines.items() if any(line in span for line in at)]
                raise AssertionError(f"{engine} failed on {named or list(lines)}: {failure}") from None
            log = (folder / "doc.log").read_text(encoding="utf-8", errors="replace")
            for kind, points, line in _OVERFULL.findall(log):
                owners = [label for label, span in lines.items() if line and int(line) in span] or list(lines)
                for label in owners:
                    boxes[label].append((kind, float(points)))
        return boxes

    return compile_


def chromium_driver(
    window: str = "1000,800", loopback: bool = False, scrollbars: bool = True, languages: str = "en-US,en"
):
    """Debian's headless Chromium through selenium, resolving no host (``loopback``: but 127.0.0.1), its
    ``languages`` those of navigator.languages and Accept-Language; skips the test when selenium, chromium
    or chromium-driver is missing. The caller quits it."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium (a test extra) drives Chromium")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    chromedriver = shutil.which("chromedriver")
    if not chromium or not chromedriver:
        pytest.skip("chromium and chromium-driver not installed")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    rules = "MAP * ~NOTFOUND" + (", EXCLUDE 127.0.0.1" if loopback else "")
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={window}",
        f"--host-resolver-rules={rules}",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        f"--lang={languages.split(',')[0]}",
    ) + (() if scrollbars else ("--hide-scrollbars",)):
        options.add_argument(arg)
    options.add_experimental_option("prefs", {"intl.accept_languages": languages})
    return webdriver.Chrome(service=Service(chromedriver), options=options)


def run_in_terminal(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run a command on a pseudo-terminal 100 columns wide (a new pty is 0 wide, and tqdm draws nothing
    there); its exit code and everything it wrote."""
    import fcntl
    import os
    import pty
    import select
    import struct
    import termios

    main_fd, child_fd = pty.openpty()
    fcntl.ioctl(child_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    process = subprocess.Popen(
        argv, stdin=child_fd, stdout=child_fd, stderr=child_fd, cwd=cwd, env={**os.environ, **(env or {})}
    )
    os.close(child_fd)
    shown = b""
    while select.select([main_fd], [], [], 120)[0]:
        try:
            chunk = os.read(main_fd, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    code = process.wait(timeout=120)
    os.close(main_fd)
    return code, shown.decode("utf-8", "replace")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """pytest-xdist (--dist loadgroup) hands out tests one by one, so that no worker is left with a long file
    at the end; a module's tests that share a module-scoped fixture (a docs build, a wheel, a browser) stay on
    one worker, so that it is made once."""
    groups: dict[str, int] = {}
    for item in items:
        definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        if any(defs and defs[-1].scope in ("module", "class", "package") for defs in definitions.values()):
            group = item.nodeid.split("::")[0]
            item.add_marker(pytest.mark.xdist_group(group))
            groups[group] = groups.get(group, 0) + 1

    # Longest first: xdist hands out work in collection order, and a module's group (a browser, a server, a
    # docs build) or a slow test begun last kept one core busy while the other sat idle. The order is a
    # function of the collected items alone, so every worker collects the same list.
    def weight(item: pytest.Item) -> tuple[int, int]:
        group = item.nodeid.split("::")[0]
        if group in groups and any(m.name == "xdist_group" for m in item.iter_markers()):
            return (0, -groups[group])
        return (1, 0) if item.get_closest_marker("slow") else (2, 0)

    items.sort(key=weight)  # stable: within a weight, the files' own order


def interruptible() -> None:
    """preexec_fn of a child a test interrupts: SIGINT back to its default, so that Python turns it into
    KeyboardInterrupt even where the suite itself was started with SIGINT ignored (a background job of a shell
    without job control)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_until(condition, seconds: float):
    """condition()'s first true value within ``seconds`` (polled every 50 ms), else its value at the end."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    return condition()
