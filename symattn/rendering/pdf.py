"""Compile a standalone LaTeX document to PDF with latexmk.

The document is what ``render(..., "latex", standalone=True)`` (or
``render_report``) writes; TeX Live does the typesetting. The run is kept
small and safe: a private temporary folder that TeX may not read or write
outside of, no shell escape, lualatex ``--safer``, no rc files, a time limit
(:data:`symattn.input.limits.LATEX_SECONDS`), and fixed dates
(``SOURCE_DATE_EPOCH=0``), so the same document gives the same bytes.

Every failure is one line: a missing program names the Debian packages to
install; a TeX error quotes the log's first ``!`` line and keeps the log.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile

from symattn.input.choices import ENGINES
from symattn.input.errors import RenderError
from symattn.input.scripts import beyond_pdflatex, engine_for, fonts_named, has_cjk

# latexmk's switches for each engine; lualatex without Lua's os, io.popen and sockets
_SWITCH = {
    "xelatex": ["-xelatex"],
    "pdflatex": ["-pdf"],
    "lualatex": ["-lualatex", "-e", "$lualatex=q/lualatex --safer --nosocket %O %S/"],
}

# Defence in depth behind the title grammar: kpathsea lets TeX open files only in its own folder
# (no absolute paths, no parent folders, no dot files), for reading and writing, and no shell escape
_SANDBOX = {"openin_any": "p", "openout_any": "p", "shell_escape": "f"}

# Debian packages that provide each engine (with what our documents use)
_PACKAGES = {
    "xelatex": ["texlive-xetex"],
    "pdflatex": ["texlive-latex-base", "texlive-fonts-recommended", "lmodern"],
    "lualatex": ["texlive-luatex"],
}


def choose_engine(tex: str, lang: str | None = None, engine: str | None = None) -> str:
    """The TeX engine for a document, from its text (the labels and the title are what varies).

    pdflatex when it sets every character (English, Latin-1); otherwise xelatex
    (the document's first line, ``% !TEX program = …``, says the same). An
    ``engine`` given is checked: pdflatex cannot set text beyond its fonts, and
    the fonts of other scripts are set up for xelatex.
    """
    needed = engine_for([tex], lang)
    if engine is None:
        return needed
    if engine not in ENGINES:
        raise RenderError(f"unknown TeX engine {engine!r}; expected one of {', '.join(ENGINES)}")
    if engine == "pdflatex" and needed != "pdflatex":
        ch = beyond_pdflatex(tex)
        what = "Chinese text" if ch is None else _named(ch)
        raise RenderError(f"pdflatex cannot set {what} in this document; use xelatex")
    fonts = fonts_named(tex) if engine == "lualatex" else ()
    if fonts:
        names = ", ".join(dict.fromkeys(font.name for font in fonts))
        raise RenderError(f"the document's {names} text is set up for xelatex; use xelatex, not lualatex")
    return engine


def _named(ch: str) -> str:
    import unicodedata

    return f"'{ch}' (U+{ord(ch):04X} {unicodedata.name(ch, '')})".replace(" )", ")")


def install_hint(engine: str, cjk: bool, fonts: bool = False) -> str:
    """The one-line message for a missing latexmk or engine (``fonts``: the document needs Noto fonts)."""
    packages = ["latexmk", *_PACKAGES[engine]]
    if cjk:
        packages.append("texlive-lang-chinese")
    packages += ["texlive-latex-recommended", "texlive-pictures"]  # and TikZ, for the figures
    if fonts:
        packages += ["fonts-noto-core", "fonts-noto-cjk"]
    return f"latexmk and {engine} are needed for PDF output; install them with: apt-get install {' '.join(packages)}"


def latex_to_pdf(
    tex: str,
    *,
    engine: str | None = None,
    lang: str | None = None,
    seconds: float | None = None,
    fit_last_page: bool = False,
) -> bytes:
    """The PDF of a standalone LaTeX document, as bytes.

    ``engine`` is ``xelatex``, ``pdflatex`` or ``lualatex``; by default
    pdflatex when it sets every character (English, Latin-1), else xelatex
    (:func:`choose_engine`).
    Raises :class:`RenderError` (one line) when latexmk or the engine is
    missing, when TeX stops with an error (the log is kept, and its path is
    in the message), or when the run takes longer than ``seconds``
    (default :data:`symattn.input.limits.LATEX_SECONDS`).

    With ``fit_last_page`` (a report or a feedback file: a page or two, with
    its own ``geometry``), a last page that holds only a few lines is set
    again with a taller text block (:func:`_refit`), so those lines join the
    page before.
    """
    if not fit_last_page:
        return _compile(tex, engine, lang, seconds)[0]
    first, first_log = _compile(tex.replace(_BEGIN, _MEASURE + _BEGIN, 1), engine, lang, seconds)
    margin = _refit(first_log)
    if margin is None:
        return first
    second, log = _compile(
        tex.replace(_BEGIN, f"\\geometry{{vmargin={margin}pt}}\n" + _MEASURE + _BEGIN, 1), engine, lang, seconds
    )
    before, after = _fill(first_log), _fill(log)
    return second if before is not None and after is not None and after[0] < before[0] else first


_BEGIN = "\\begin{document}"
# at shipout, where the last paragraph ended: its page, the height used down to it from the text block's top,
# the text block's height and the paper's (engines without \\pdfsavepos, lualatex, are not measured)
_MEASURE = (
    "\\AtEndDocument{\\par\\ifdefined\\pdfsavepos\\pdfsavepos\\write-1{symattn-fill:\\the\\value{page}:"
    "\\the\\dimexpr\\paperheight-\\pdflastypos sp-1in-\\topmargin-\\headheight-\\headsep\\relax:"
    "\\the\\textheight:\\the\\paperheight}\\fi}\n"
)
_FILL = re.compile(r"^symattn-fill:(\d+):([\d.]+)pt:([\d.]+)pt:([\d.]+)pt$", re.M)
NEAR_EMPTY = 0.2  # of the text height: a last page holding less than this is folded into the one before
MIN_MARGIN = 36.0  # pt, top and bottom together at least twice this (about 1.3 cm each)


def _fill(log: str) -> tuple[int, float, float, float] | None:
    m = _FILL.search(log)
    if m is None:
        return None
    return int(m[1]), float(m[2]), float(m[3]), float(m[4])


def _refit(log: str) -> str | None:
    """The top and bottom margin (in pt, as TeX reads it) whose taller text block takes a report's few last
    lines back onto the pages before.

    The last page's lines, and a little slack for the skips between them, are shared out among the
    pages before it, if the margins keep :data:`MIN_MARGIN`.
    """
    fill = _fill(log)
    if fill is None:
        return None
    pages, used, height, paper = fill
    if pages < 2 or used > NEAR_EMPTY * height:
        return None
    taller = height + (used + 24) / (pages - 1)
    if paper - taller < 2 * MIN_MARGIN:
        return None
    return f"{(paper - taller) / 2:.2f}"


def _compile(tex: str, engine: str | None, lang: str | None, seconds: float | None) -> tuple[bytes, str]:
    """The PDF and the engine's log."""
    from symattn.input.limits import LATEX_SECONDS

    engine = choose_engine(tex, lang, engine)
    seconds = LATEX_SECONDS if seconds is None else seconds
    latexmk, program = shutil.which("latexmk"), shutil.which(engine)
    if latexmk is None or program is None:
        raise RenderError(install_hint(engine, has_cjk([tex]) or lang == "zh", bool(fonts_named(tex))))
    folder = tempfile.mkdtemp(prefix="symattn-pdf-")
    try:
        with open(os.path.join(folder, "document.tex"), "w", encoding="utf-8", newline="\n") as fh:
            fh.write(tex)
        command = [
            latexmk,
            "-norc",
            *_SWITCH[engine],
            "-no-shell-escape",
            "-interaction=nonstopmode",
            "-halt-on-error",
            "-quiet",
            "document.tex",
        ]
        env = dict(os.environ, SOURCE_DATE_EPOCH="0", FORCE_SOURCE_DATE="1", TEXMFOUTPUT=folder, **_SANDBOX)
        code, output = _run(command, folder, env, seconds, engine)
        pdf = os.path.join(folder, "document.pdf")
        if code != 0 or not os.path.isfile(pdf):
            raise RenderError(_failure(folder, engine, output))
        with open(pdf, "rb") as fh:
            data = fh.read()
        with open(os.path.join(folder, "document.log"), encoding="utf-8", errors="replace") as fh:
            return data, fh.read()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run(command: list[str], folder: str, env: dict[str, str], seconds: float, engine: str) -> tuple[int, str]:
    """Run latexmk in its own process group; end the whole group on a timeout, an interrupt or :func:`end_tex`."""
    process = subprocess.Popen(
        command,
        cwd=folder,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    _RUNNING.append(process)
    try:
        output, _ = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        _end(process)
        raise TexTimeLimit(f"{engine} took longer than {seconds:g} s (the time limit of a TeX run)") from None
    except BaseException:  # Ctrl-C, SIGTERM, or the command's own deadline: leave no TeX behind
        _end(process)
        raise
    finally:
        _RUNNING.remove(process)
    return process.returncode, output.decode("utf-8", "replace")


def _end(process: subprocess.Popen) -> None:
    """Kill the run's whole process group (latexmk and the engine it started), then reap latexmk."""
    _kill_group(process)
    process.wait()


class TexTimeLimit(RenderError):
    """A TeX run went past its time limit (and was killed)."""


# the TeX runs of this process now: one, unless a caller runs several in threads
_RUNNING: list[subprocess.Popen] = []


def end_tex() -> None:
    """Kill every TeX run of this process, without waiting: for a SIGTERM handler, before the process ends."""
    for process in list(_RUNNING):
        _kill_group(process)


def _kill_group(process: subprocess.Popen) -> None:
    # only while latexmk is unreaped: then its pid, which names the group, cannot have been reused
    if process.returncode is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _failure(folder: str, engine: str, output: str) -> str:
    """The one-line message of a failed run; the log is copied where it survives the folder."""
    log_path = os.path.join(folder, "document.log")
    try:
        with open(log_path, encoding="utf-8", errors="replace") as fh:
            log = fh.read()
    except OSError:
        log = ""
    first = next((line.strip() for line in log.splitlines() if line.startswith("!")), None)
    if first is None:
        lines = [line.strip() for line in output.splitlines() if line.strip()]
        first = lines[-1] if lines else "latexmk failed without a message"
    if "fontspec Error" in first and "cannot be found" in first:
        first += "; install fonts-noto-core and fonts-noto-cjk"
    if not log:
        return f"{engine} failed: {first}"
    fd, kept = tempfile.mkstemp(prefix="symattn-", suffix=".log")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(log)
    return f"{engine} failed: {first} (the log is kept at {kept})"
