"""A command stopped by SIGTERM (as a job runner or `timeout` stops it) leaves no TeX process behind."""

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import wait_until

LOOP = "\\documentclass{article}\n\\begin{document}\n\\loop\\iftrue\\repeat\n\\end{document}\n"
# the real command line, whose PDF step typesets a document that never ends (with latexmk, for real)
LAUNCHER = (
    "import sys, symattn.rendering.pdf as pdf; typeset = pdf.latex_to_pdf; "
    f"pdf.latex_to_pdf = lambda tex, **kw: typeset({LOOP!r}, **kw); "
    "from symattn.cli import main; sys.exit(main(sys.argv[1:]))"
)


def _processes() -> list[tuple[int, str, int, int]]:
    """(pid, name, parent pid, process group) of every live process (not zombies)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            state, ppid, group = stat[stat.rindex(")") + 2 :].split()[:3]
            if state != "Z":
                found.append((int(entry), stat[stat.index("(") + 1 : stat.rindex(")")], int(ppid), int(group)))
    return found


def _tex_group(parent: int) -> int | None:
    """The process group of the TeX run that ``parent`` started, once pdflatex runs in it."""
    processes = _processes()
    groups = {pid for pid, _, ppid, _ in processes if ppid == parent}  # latexmk leads its own group
    return next((group for _, name, _, group in processes if name == "pdflatex" and group in groups), None)


def _alive(group: int) -> bool:
    return any(g == group for *_, g in _processes())


@pytest.mark.client
def test_sigterm_kills_the_tex_run(tmp_path):
    if not (shutil.which("latexmk") and shutil.which("pdflatex")):
        pytest.skip("latexmk and pdflatex not installed (TeX Live)")
    process = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, "render", "--lang", "en", "-o", "out.pdf"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        group = wait_until(lambda: _tex_group(process.pid), 60)
        assert group, "pdflatex never started"
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert (process.returncode, err) == (130, "symattn: interrupted\n")
    assert wait_until(lambda: not _alive(group), 10) and not (tmp_path / "out.pdf").exists()
