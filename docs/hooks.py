"""mkdocs hooks: every example output, picture link and reference table of the site, made by running symattn.

Each generated piece is committed in its page, between ``<!-- symattn: NAME -->`` and ``<!-- end
symattn: NAME -->`` (docs/blocks.py), so a page reads whole where it is stored; NAME is a key of PIECES or
PICTURES below, or ``figure-causal``. The build makes every piece again and stops on a block that differs
(or an unknown NAME): ``python docs/hooks.py --write`` rewrites them, ``--check`` lists them (exit 1).
Outputs come from running symattn (``sys.executable -m symattn``, in a temporary folder, with a timeout);
the command-line reference is walked from the argparse parser itself and the limits table is read from
the limits module, so no page can drift from the program. Every piece is the same bytes on every run.
The PNG pictures of compiled pages are committed files (docs/generated/), which ``--write`` makes where TeX
and pdftoppm are installed; the offline HTML pages the guides link to are made at build time.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import io
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import tokenize
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

# Where the generated pages look in the package: the one place to change when modules move.
CLI_MODULE = "symattn.cli.parser"  # exports PARSER_FUNCTION
PARSER_FUNCTION = "build_parser"
LIMITS_MODULE = "symattn.input.limits"
PARTS_MODULE = "symattn.variants"  # its LIMIT_MODULES: each variant's module, whose "limits" sections are read too
TITLE_MATH_MODULE = "symattn.input.titlemath"
PACKAGE = "symattn"

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SECONDS = 120  # one symattn run; a TeX compile is the slowest
PICTURE_DPI = "60"

log = logging.getLogger("mkdocs.hooks.symattn")


def _load_blocks():
    # docs/blocks.py, beside this file (mkdocs loads this hook from its path, not as a package)
    import importlib.util

    spec = importlib.util.spec_from_file_location("symattn_docs_blocks", DOCS / "blocks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


blocks = _load_blocks()

# the checkout's package, not some other installed copy, is the one documented
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# --- running symattn ------------------------------------------------------------------------------


def run(*argv: str, cwd: Path, codes: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
    """Run ``symattn ARGV`` on the checkout, as ``python -m symattn`` would; an exit code not in ``codes``
    stops the build.

    Each run is a forked copy of this process with SymPy, numpy and the command line already imported: a
    process of its own (its own folder, standard streams, exit code and signals, as a new one has), without
    the half second a new interpreter spends importing them, some thirty times a build. Where the build has
    threads (mkdocs serve), a new interpreter all the same."""
    if threading.active_count() > 1:  # mkdocs serve: a copy of a process with threads may hang on their locks
        done = _spawned(argv, cwd)
    else:
        _imported()
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()  # nothing of this process's is written twice by the copy
            pid = os.fork()
            if pid == 0:  # the copy: it never returns into the build
                _as_symattn(argv, cwd, out.fileno(), err.fileno())
            code = _waited(pid, argv)
            out.seek(0)
            err.seek(0)
            done = subprocess.CompletedProcess(["symattn", *argv], code, out.read(), err.read())
    if done.returncode not in codes:
        raise PluginError(
            f"symattn {' '.join(argv)}: exit {done.returncode}: {done.stderr.decode('utf-8', 'replace').strip()}"
        )
    return done


def _spawned(argv: tuple[str, ...], cwd: Path) -> subprocess.CompletedProcess:
    """``python -m symattn ARGV`` as a new interpreter, on the checkout."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    try:
        return subprocess.run(
            [sys.executable, "-m", "symattn", *argv],
            cwd=cwd,
            env=env,
            capture_output=True,
            timeout=SECONDS,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise _too_long(argv) from None


def _imported() -> None:
    """The checkout's symattn, and what its commands import, loaded once in this process."""
    import numpy  # noqa: F401
    import sympy  # noqa: F401

    import symattn

    if Path(symattn.__file__).resolve().parent != ROOT / "symattn":
        raise PluginError(f"symattn is imported from {symattn.__file__}, not from this checkout")
    import symattn.cli.commands  # noqa: F401


def _as_symattn(argv: tuple[str, ...], cwd: Path, out: int, err: int) -> None:
    """In the forked copy: the command line's main with the run's folder and streams, then its exit."""
    code = 70
    try:
        os.chdir(cwd)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        from symattn.cli.commands import main

        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse's usage errors: as the interpreter ends on them
            code = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        os._exit(code if isinstance(code, int) else 70)


def _waited(pid: int, argv: tuple[str, ...]) -> int:
    """The forked run's exit code; killed past SECONDS."""
    end = time.monotonic() + SECONDS
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > end:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            raise _too_long(argv)
        time.sleep(0.005)


def _too_long(argv: tuple[str, ...]) -> PluginError:
    return PluginError(f"symattn {' '.join(argv)}: took longer than {SECONDS} s")


def symattn(*argv: str, cwd: Path, codes: tuple[int, ...] = (0,)) -> str:
    """What ``symattn ARGV`` prints."""
    return run(*argv, cwd=cwd, codes=codes).stdout.decode("utf-8")


def between(text: str, start: str, end: str | None = None) -> str:
    """The lines from the first that holds ``start`` up to, not including, the next that holds ``end``."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if start in line), None)
    if first is None:
        raise PluginError(f"excerpt: no line holds {start!r}")
    if end is None:
        return "\n".join(lines[first:]).strip("\n")
    last = next((i for i in range(first + 1, len(lines)) if end in lines[i]), None)
    if last is None:
        raise PluginError(f"excerpt: no line after {start!r} holds {end!r}")
    return "\n".join(lines[first:last]).strip("\n")


def fence(text: str, lang: str = "text", title: str | None = None) -> str:
    ticks = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
    head = f"{ticks}{lang}" + (f' title="{title}"' if title else "")
    return f"{head}\n{text.rstrip()}\n{ticks}"


def collapsed(summary: str, body: str) -> str:
    """A block the reader opens (pymdownx.details), for whole outputs next to their excerpt."""
    return f'??? example "{summary}"\n\n' + "\n".join("    " + line if line else "" for line in body.splitlines())


# --- the pieces made by running symattn -----------------------------------------------------------


def derivation_zh(tmp: Path) -> str:
    return fence(between(symattn("render", cwd=tmp), "「它」那一行", "## 步骤 3"), "markdown")


def derivation_en(tmp: Path) -> str:
    return fence(between(symattn("render", "--lang", "en", cwd=tmp), "First the row of", "## Step 3"), "markdown")


def derivation_projection(tmp: Path) -> str:
    text = symattn("render", "--example", "projection", "--lang", "en", cwd=tmp)
    return fence(between(text, "$Q = XW_Q + b_Q$:", "$K = XW_K"), "markdown")


def derivation_multihead(tmp: Path) -> str:
    text = symattn("render", "--example", "multihead", "--lang", "en", cwd=tmp)
    return fence(between(text, "## Concatenate the heads", "## Toy example"), "markdown")


def derivation_window(tmp: Path) -> str:
    text = symattn("render", "--example", "window", "--lang", "en", cwd=tmp)
    return fence(between(text, "## Mask:", "Blocked scores become"), "markdown")


def derivation_backward(tmp: Path) -> str:
    text = symattn("render", "--example", "backward", "--lang", "en", cwd=tmp)
    return fence(between(text, "## Backward 2:", "Each weight's gradient is"), "markdown")


def latex_fragment(tmp: Path) -> str:
    text = symattn("render", "--lang", "en", "--format", "latex", cwd=tmp)
    return fence(between(text, "First the row of", "The full score matrix"), "latex")


def latex_preamble(tmp: Path) -> str:
    text = symattn("render", "--lang", "en", "--format", "latex", "--standalone", cwd=tmp)
    return fence(
        between(text, "\\documentclass", "\\begin{document}"),
        "latex",
        "symattn render --lang en --format latex --standalone",
    )


def report_preamble(tmp: Path) -> str:
    text = symattn("check", "--example", "--lang", "en", "--format", "latex", "--standalone", cwd=tmp, codes=(1,))
    return fence(
        between(text, "\\documentclass", "\\begin{document}"),
        "latex",
        "symattn check --example --lang en --format latex --standalone",
    )


def example_spec(tmp: Path) -> str:
    return fence(symattn("example", "--lang", "en", cwd=tmp), "toml", "symattn example --lang en")


def example_claims(tmp: Path) -> str:
    text = symattn("example", "--name", "seed-claims", "--lang", "en", cwd=tmp)
    return fence(text, "toml", "symattn example --name seed-claims --lang en")


def check_en(tmp: Path) -> str:
    return fence(symattn("check", "--example", "--lang", "en", cwd=tmp, codes=(1,)))


def check_zh(tmp: Path) -> str:
    return fence(between(symattn("check", "--example", cwd=tmp, codes=(1,)), "错在哪里", None))


def check_json(tmp: Path) -> str:
    data = json.loads(symattn("check", "--example", "--lang", "en", "--format", "json", cwd=tmp, codes=(1,)))
    claim = next(c for c in data["claims"] if c["verdict"] == "last-digit")
    excerpt = {"claims": [claim, "…"], "summary": data["summary"]}
    return fence(
        json.dumps(excerpt, ensure_ascii=False, indent=2),
        "json",
        "symattn check --example --lang en --format json (excerpt)",
    )


def compute_json(tmp: Path) -> str:
    kept = [
        line
        for line in symattn("compute", cwd=tmp).splitlines()
        if line.startswith(('  "exp_sum"', '  "weights"', '  "output"'))
    ]
    if len(kept) != 3:
        raise PluginError("compute: expected exp_sum, weights and output lines")
    return fence("{\n" + "\n".join(kept) + "\n}", "json")


def kernel_code(tmp: Path) -> str:
    return fence((DOCS / "examples" / "float_kernel.py").read_text(encoding="utf-8"), "python", "float_kernel.py")


def pytest_example(tmp: Path) -> str:
    code = (DOCS / "examples" / "test_sdpa_kernel.py").read_text(encoding="utf-8")
    return fence(code, "python", "test_sdpa_kernel.py")


def _kernel_results(tmp: Path) -> Path:
    folder = tmp / "kernel"
    if not (folder / "o64.json").exists():
        folder.mkdir(exist_ok=True)
        symattn("example", "--lang", "en", "-o", "seed.toml", cwd=folder)
        try:
            subprocess.run(
                [sys.executable, str(DOCS / "examples" / "float_kernel.py")],
                cwd=folder,
                check=True,
                capture_output=True,
                timeout=SECONDS,
            )
        except subprocess.SubprocessError as exc:
            raise PluginError(f"float_kernel.py failed: {exc}") from None
    return folder


def compare_f64(tmp: Path) -> str:
    folder = _kernel_results(tmp)
    text = symattn("compare", "seed.toml", "o64.json", cwd=folder)
    summary = json.loads(symattn("compare", "seed.toml", "o64.json", "--format", "json", cwd=folder))["summary"]
    off = summary["entries"] - summary["correctly_rounded"]
    done = run("compare", "seed.toml", "o64.json", "--max-ulp", "1", cwd=folder, codes=(0, 1)).returncode
    return (
        fence(text) + f"\n\n{off} of {summary['entries']} entries are not correctly rounded, and the largest "
        f"error is {summary['max_ulps']} ULP, so `symattn compare seed.toml o64.json --max-ulp 1` exits {done} "
        "(1 past the bound, or on a NaN; 0 otherwise)."
    )


def compare_f32(tmp: Path) -> str:
    folder = _kernel_results(tmp)
    return fence(symattn("compare", "seed.toml", "o32.json", "--dtype", "float32", cwd=folder))


def compare_json(tmp: Path) -> str:
    folder = _kernel_results(tmp)
    text = symattn("compare", "seed.toml", "o32.json", "--dtype", "float32", "--format", "json", cwd=folder)
    return collapsed("symattn compare seed.toml o32.json --dtype float32 --format json", fence(text, "json"))


def certificate(tmp: Path) -> str:
    folder = tmp / "certificate"
    folder.mkdir()
    symattn("compute", "--certify", "--no-exact", "--digits", "30", "-o", "cert.json", cwd=folder)
    said = symattn("verify-certificate", "cert.json", cwd=folder)
    data = json.loads((folder / "cert.json").read_text(encoding="utf-8"))
    shown = {
        "sqrt_dk": data["sqrt_dk"],
        "certificate": {k: v for k, v in data["certificate"].items() if not isinstance(v, (dict, list))},
    }
    return (
        fence(json.dumps(shown, indent=2), "json", "cert.json (excerpt)")
        + "\n\n"
        + fence("$ symattn verify-certificate cert.json\n" + said, "console")
    )


def exercise_class(tmp: Path) -> str:
    symattn("exercise", str(ROOT / "examples" / "homework.toml"), "--count", "3", "--seed", "1", "-o", "out", cwd=tmp)
    out = tmp / "out"
    listing = "\n".join(str(p.relative_to(tmp)) for p in sorted(out.rglob("*")) if p.is_file())
    sheet = (out / "s01" / "sheet.md").read_text(encoding="utf-8")
    answers = (out / "s01" / "answers.toml").read_text(encoding="utf-8")
    return (
        fence(listing, "text", "the files written")
        + "\n\n"
        + collapsed("out/s01/sheet.md", fence(sheet, "markdown"))
        + "\n\n"
        + fence(answers, "toml", "out/s01/answers.toml")
    )


def _fill(answers: Path, tmp: Path, slip: bool) -> None:
    """A student's numbers: the exact values rounded to the claims' decimals; with ``slip``, scaled = scores."""
    text = answers.read_text(encoding="utf-8")
    inputs, _, _ = text.partition("[claims]")
    spec = tmp / f"{answers.parent.name}-spec.toml"
    spec.write_text("\n".join(line for line in inputs.splitlines() if not line.startswith("student")), encoding="utf-8")
    values = json.loads(symattn("compute", "--no-exact", str(spec), cwd=tmp))

    def number(match: re.Match) -> str:
        name, row, col = match.group(1), int(match.group(2)) - 1, int(match.group(3)) - 1
        source = "scores" if slip and name == "scaled" else name
        places = {"scores": "0.01", "output": "0.1"}.get(name, "0.001")
        value = Decimal(values[source]["value"][row][col]).quantize(Decimal(places), ROUND_HALF_UP)
        return f'"{name}[{row + 1}][{col + 1}]" = {value}'

    claims = re.sub(r'"(\w+)\[(\d+)\]\[(\d+)\]" = ""', number, text.partition("[claims]")[2])
    answers.write_text(inputs + "[claims]" + claims, encoding="utf-8")


def grade_class(tmp: Path) -> str:
    out = tmp / "out"
    if not out.exists():
        exercise_class(tmp)
    _fill(out / "s01" / "answers.toml", tmp, slip=False)
    _fill(out / "s02" / "answers.toml", tmp, slip=True)
    (out / "s03" / "answers.toml").unlink()  # s03 hands in nothing
    return fence(symattn("grade", "out", "--format", "markdown", cwd=tmp), "markdown")


def lms_moodle(tmp: Path) -> str:
    homework = str(ROOT / "examples" / "homework.toml")
    symattn("exercise", homework, "--count", "3", "--seed", "1", "--format", "moodle", "-o", "quiz.xml", cwd=tmp)
    import xml.etree.ElementTree as ET

    question = ET.parse(tmp / "quiz.xml").getroot().findall("question")[1]
    gaps = re.findall(
        r"<tr><td>(\d+)</td><td>([^<]*)</td>.*?(\{1:NUMERICAL:[^}]*\})", question.findtext("questiontext/text")
    )
    lines = [f"{n:>2}  {what:<14} {gap}" for n, what, gap in gaps]
    return fence("\n".join(lines), "text", f"the gaps of {question.findtext('name/text')}")


def lms_grade(tmp: Path) -> str:
    """A Responses report of two students, as Moodle writes it: s01 right, s02 with the scaling left out and
    every later number carried from it."""
    import csv
    import io

    from symattn.classroom.exercises import exercise
    from symattn.classroom.gaps import gaps

    homework = ROOT / "examples" / "homework.toml"
    rows = []
    for (surname, first, email), v in zip(
        [("Ng", "Ada", "ada@example.org"), ("Okafor", "Ben", "ben@example.org")],
        exercise(homework, ["s01", "s02", "s03"], 1),
    ):
        right = [format(g.value, "f") for g in gaps(v)]
        slipped = [format({s.name: s.value for s in g.slips}.get("no_scaling", g.value), "f") for g in gaps(v)]
        given = right if email.startswith("ada") else slipped
        summary = "; ".join(f"part {k}: {x}" for k, x in enumerate(given, 1))
        rows.append(
            [surname, first, email, "Finished", summary, "; ".join(f"part {k}: {x}" for k, x in enumerate(right, 1))]
        )
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["Surname", "First name", "Email address", "State", "Response 1", "Right answer 1"])
    writer.writerows(rows)
    (tmp / "responses.csv").write_text(out.getvalue(), encoding="utf-8")
    args = ("grade", "--lms-csv", "responses.csv", "--template", str(homework), "--seed", "1", "--count", "3")
    return (
        collapsed("responses.csv", fence(out.getvalue(), "text"))
        + "\n\n"
        + fence(symattn(*args, "--format", "markdown", cwd=tmp), "markdown")
    )


def lms_moodle_grades(tmp: Path) -> str:
    """The marks of the Responses report above, as Moodle's "Import grades from CSV" takes them."""
    if not (tmp / "responses.csv").exists():
        lms_grade(tmp)
    homework = str(ROOT / "examples" / "homework.toml")
    args = ("grade", "--lms-csv", "responses.csv", "--template", homework, "--seed", "1", "--count", "3")
    return fence(symattn(*args, "--format", "moodle-grades", cwd=tmp), "text", "moodle-grades.csv")


def lms_canvas_grades(tmp: Path) -> str:
    """A class folder's marks (s01 right, s02 without the scaling, s03 nothing) as Canvas imports them."""
    folder = tmp / "canvas"
    folder.mkdir()
    homework = str(ROOT / "examples" / "homework.toml")
    symattn("exercise", homework, "--count", "3", "--seed", "1", "-o", "class", cwd=folder)
    _fill(folder / "class" / "s01" / "answers.toml", folder, slip=False)
    _fill(folder / "class" / "s02" / "answers.toml", folder, slip=True)
    (folder / "class" / "s03" / "answers.toml").unlink()
    text = symattn("grade", "class", "--format", "canvas-grades", "--assignment-id", "4521", cwd=folder)
    return fence(text, "text", "canvas-grades.csv")


PIECES = {
    "derivation-zh": derivation_zh,
    "derivation-en": derivation_en,
    "derivation-projection": derivation_projection,
    "derivation-multihead": derivation_multihead,
    "derivation-backward": derivation_backward,
    "derivation-window": derivation_window,
    "latex-fragment": latex_fragment,
    "latex-preamble": latex_preamble,
    "report-preamble": report_preamble,
    "example-spec": example_spec,
    "example-claims": example_claims,
    "check-en": check_en,
    "check-zh": check_zh,
    "check-json": check_json,
    "compute-json": compute_json,
    "kernel-code": kernel_code,
    "pytest-example": pytest_example,
    "compare-f64": compare_f64,
    "compare-f32": compare_f32,
    "compare-json": compare_json,
    "certificate": certificate,
    "exercise-class": exercise_class,
    "grade-class": grade_class,
    "lms-moodle": lms_moodle,
    "lms-grade": lms_grade,
    "lms-moodle-grades": lms_moodle_grades,
    "lms-canvas-grades": lms_canvas_grades,
}


# --- pictures of compiled pages -------------------------------------------------------------------

# name: (what it shows, the symattn arguments that write out.pdf, page, TeX engine it needs)
PICTURES = {
    "picture-seed-en": (
        "Page 1 of the English derivation (pdflatex)",
        ["render", "--lang", "en", "--format", "pdf", "-o", "out.pdf"],
        1,
        "pdflatex",
    ),
    "picture-seed-zh": (
        "Page 1 of the Chinese derivation (xelatex and ctex)",
        ["render", "--format", "pdf", "-o", "out.pdf"],
        1,
        "xelatex",
    ),
    "picture-check-en": (
        "Page 1 of the check report of the worked example",
        ["check", "--example", "--lang", "en", "--format", "pdf", "-o", "out.pdf"],
        1,
        "pdflatex",
    ),
    "picture-causal4": (
        "Page 4 of the 4-token causal example",
        ["render", str(DOCS / "causal4.toml"), "--format", "pdf", "-o", "out.pdf"],
        4,
        "pdflatex",
    ),
    "picture-sheet": (
        "Student s01's exercise sheet (--format pdf)",
        [
            "exercise",
            str(ROOT / "examples" / "homework.toml"),
            "--count",
            "1",
            "--seed",
            "1",
            "--format",
            "pdf",
            "-o",
            "class",
        ],
        1,
        "pdflatex",
    ),
}
PICTURE_PDF = {"picture-sheet": "class/s01/sheet.pdf"}


def missing_tex(engine: str) -> list[str]:
    """The programs (or ctex, for xelatex) that a picture needs and this machine lacks."""
    needed = ("latexmk", engine, "pdftoppm") + (("kpsewhich",) if engine == "xelatex" else ())
    missing = [p for p in needed if shutil.which(p) is None]
    if engine == "xelatex" and not missing:
        found = subprocess.run(["kpsewhich", "ctexart.cls"], capture_output=True, text=True, timeout=30, check=False)
        if not found.stdout.strip():
            missing.append("ctex (texlive-lang-chinese)")
    return missing


def picture(name: str, tmp: Path) -> bytes | None:
    _, argv, page, engine = PICTURES[name]
    missing = missing_tex(engine)
    if missing:
        log.info("symattn docs: %s left out: %s not installed", name, ", ".join(missing))
        return None
    folder = tmp / name
    folder.mkdir()
    symattn(*argv, cwd=folder, codes=(0, 1))  # check --example exits 1: it finds wrong claims
    pdf = folder / PICTURE_PDF.get(name, "out.pdf")
    subprocess.run(
        [
            "pdftoppm",
            "-png",
            "-r",
            PICTURE_DPI,
            "-f",
            str(page),
            "-l",
            str(page),
            "-singlefile",
            str(pdf),
            str(folder / "page"),
        ],
        check=True,
        capture_output=True,
        timeout=SECONDS,
    )
    return (folder / "page.png").read_bytes()


# --- the command-line reference, walked from the parser --------------------------------------------


def _cell(text: str) -> str:
    """Prose (a help text, a comment, a docstring) in a Markdown table cell: code spans kept, the rest escaped."""
    out = []
    for i, part in enumerate(re.split(r"(``[^`]+``|`[^`]+`)", " ".join(text.split()))):
        if i % 2:
            out.append("`" + part.strip("`") + "`")
        else:
            part = re.sub(r"([\\`*_\[\]|#])", r"\\\1", part)
            out.append(part.replace("<", "&lt;").replace(">", "&gt;"))
    return "".join(out)


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help:
        return ""
    return parser._get_formatter()._expand_help(action)


def _option_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| option | value | default | meaning |", "|---|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue
        names = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.metavar or action.dest}`"
        if action.choices and not isinstance(action, argparse._SubParsersAction):
            value = ", ".join(f"`{c}`" for c in action.choices)
        elif action.nargs == 0:
            value = ""
        else:
            value = f"`{action.metavar or action.dest.upper()}`" if action.option_strings else ""
        if action.nargs == "?" and not action.option_strings:
            value = "optional"
        default = action.default
        shown = "" if default in (None, False, argparse.SUPPRESS) or action.nargs == 0 else f"`{default}`"
        rows.append(f"| {names} | {value} | {shown} | {_cell(_help(parser, action))} |")
    return rows


def _narrow(parser: argparse.ArgumentParser) -> None:
    # a fixed width, so the usage lines do not depend on the terminal that builds the site
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=80, max_help_position=30)


def usage(parser: argparse.ArgumentParser) -> str:
    """The usage lines without "usage: ", continuation lines still under the first argument."""
    first, *rest = parser.format_usage().rstrip().split("\n")
    return "\n".join([first.removeprefix("usage: ")] + [line[len("usage: ") :] for line in rest])


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of each subcommand, in the parser's order."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
    return [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]


def cli_reference(tmp: Path) -> str:
    parser = getattr(importlib.import_module(CLI_MODULE), PARSER_FUNCTION)()
    _narrow(parser)
    commands = subcommands(parser)
    for _, _, sub in commands:
        _narrow(sub)
    out = [
        parser.description or "",
        "",
        (
            "Every command, its usage and its options, as `symattn --help` and `symattn COMMAND --help` say them "
            "(this page is generated from the program's own argument parser when the site is built)."
        ),
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    out += [f"| [`{name}`](#symattn-{name}) | {_cell(help)} |" for name, help, _ in commands]
    out += ["", fence("\n".join(usage(sub) for _, _, sub in commands), "text", "synopsis"), ""]
    for name, help, sub in commands:
        out += [
            f"## symattn {name} {{#symattn-{name}}}",
            "",
            _cell(help[:1].upper() + help[1:]) + ".",
            "",
            fence(usage(sub)),
            "",
        ]
        out += _option_rows(sub) + [""]
    out += ["## symattn", "", fence(usage(parser)), ""]
    out += _option_rows(parser)
    return "\n".join(out)


# --- the limits table, read from the limits module -------------------------------------------------


def _header(comment: str) -> str | None:
    found = re.match(r"#\s*-{3,}\s*(.*?)\s*-*\s*$", comment)
    return found.group(1) if found else None


def limits_sections() -> list[tuple[str, str, list[tuple[str, object, str, str]]]]:
    """(section, note, [(name, value, as written, comment)]): the limits module's in its order, then each
    variant's own (the sections of its module whose title starts with "limits")."""
    sections = _module_sections(LIMITS_MODULE)
    for module in part_limit_modules():
        sections += [section for section in _module_sections(module) if section[0].startswith("limits")]
    return sections


def part_limit_modules() -> list[str]:
    return list(importlib.import_module(PARTS_MODULE).LIMIT_MODULES)


def _module_sections(module_name: str) -> list[tuple[str, str, list[tuple[str, object, str, str]]]]:
    """A module's sections of constants, in its order.

    A ``# --- title ---`` line starts a section and the comment lines right under it are its note; a
    constant's comment is the comment block directly above it (if any) and its trailing comment.
    """
    module = importlib.import_module(module_name)
    source = Path(module.__file__).read_text(encoding="utf-8")
    comments = {
        token.start[0]: token.string.lstrip("#").strip()
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    }
    constants = {}
    for node in ast.parse(source).body:
        target = (
            node.targets[0]
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            else node.target
            if isinstance(node, ast.AnnAssign)
            else None
        )
        if isinstance(target, ast.Name) and target.id.isupper():
            constants[node.lineno] = (target.id, ast.get_source_segment(source, node.value) or "")
    sections: list[tuple[str, list[str], list]] = [("", [], [])]
    pending: list[str] = []
    under_header = False
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            pending, under_header = [], False
        elif stripped.startswith("#"):
            title = _header(stripped)
            if title is not None:
                sections.append((title, [], []))
                pending, under_header = [], True
            else:
                (sections[-1][1] if under_header else pending).append(comments[number])
        else:
            if number in constants:
                name, written = constants[number]
                comment = " ".join(pending + [comments.get(number, "")]).strip()
                sections[-1][2].append((name, getattr(module, name), written, comment))
            pending, under_header = [], False
    return [(title, " ".join(note), rows) for title, note, rows in sections if rows]


def limit_value(value: object) -> str:
    """How the limits page writes a limit's value (the docs test writes it the same way)."""
    return f"{value:,}" if isinstance(value, int) else repr(value)


def _bytes(value: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size and value % size == 0:
            return f" ({value // size} {unit})"
    return ""


def limits_table(tmp: Path) -> str:
    out = []
    for title, note, rows in limits_sections():
        heading = title if title.startswith(PACKAGE) else title[:1].upper() + title[1:]
        out += [f"### {heading}", ""] if title else []
        out += [_cell(note), ""] if note else []
        out += ["| limit | value | in the module | what it bounds |", "|---|---:|---|---|"]
        for name, value, written, comment in rows:
            plain = written.replace("_", "") == str(value)
            size = _bytes(value) if name.endswith("BYTES") else ""
            out.append(
                f"| `{name}` | {limit_value(value)}{size} | {'' if plain else f'`{written}`'} | {_cell(comment)} |"
            )
        out.append("")
    # the module's path in the package, not on this disk: a regular install puts it in site-packages
    where = LIMITS_MODULE.replace(".", "/") + ".py"
    out.append(
        f"Read from `{LIMITS_MODULE}` ({where}) and each variant's module of `{PARTS_MODULE}` when the site was built."
    )
    return "\n".join(out)


# --- the package map, read from the package's own sources ------------------------------------------


def _imports(tree: ast.Module, module: str, is_package: bool) -> set[str]:
    """What ``module`` imports from the package, inside functions too: ``from A import B`` as ``A.B``, which
    the map shortens to the module it names (``from symattn import variants`` is ``variants``, ``from
    symattn.input.spec import Spec`` is ``input.spec``)."""
    found = set()
    base = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parent = base[: len(base) - node.level + 1]
                name = ".".join(parent + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.update(f"{name}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {n for n in found if n.startswith(PACKAGE + ".")}


def package_map(tmp: Path) -> str:
    package = ROOT / PACKAGE
    modules: dict[str, tuple[str, set[str]]] = {}
    for path in sorted(package.rglob("*.py")):
        if "vendor" in path.parts:
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        doc = (ast.get_docstring(tree) or "").strip().split("\n\n")[0]
        modules[name] = (" ".join(doc.split()), _imports(tree, name, is_package))
    known = set(modules)

    def short(name: str) -> str:
        while name not in known and "." in name:
            name = name.rsplit(".", 1)[0]
        return name.removeprefix(PACKAGE + ".") if name != PACKAGE else PACKAGE

    folders: dict[str, list[str]] = {}
    for name in modules:
        folder = name if any(m.startswith(name + ".") for m in modules) else name.rsplit(".", 1)[0]
        folders.setdefault(folder, []).append(name)
    out = []
    for folder, names in folders.items():
        path = folder.replace(".", "/") + "/"
        out += [
            f"### `{path}`",
            "",
            _cell(modules[folder][0]) if folder in modules else "",
            "",
            "| module | its job | imports from the package |",
            "|---|---|---|",
        ]
        for name in names:
            if name == folder:
                continue
            uses = sorted({short(n) for n in modules[name][1]} - {short(name), PACKAGE})
            out.append(
                f"| `{name.rsplit('.', 1)[-1]}` | {_cell(modules[name][0])} | {', '.join(f'`{u}`' for u in uses)} |"
            )
        out.append("")
    return "\n".join(out)


def title_grammar(tmp: Path) -> str:
    module = importlib.import_module(TITLE_MATH_MODULE)
    doc = module.__doc__ or ""
    grammar = doc.split("::", 1)[1].split("\n\n", 2)[1] if "::" in doc else ""
    commands = ", ".join(f"`\\{name}`" for name in sorted(module.COMMANDS))
    symbols = " ".join(f"`\\{c}`" for c in sorted(getattr(module, "_CONTROL_SYMBOLS", ())) if c != " ")
    return (
        fence("\n".join(line[4:] for line in grammar.splitlines()), "text", "the grammar of a title's math")
        + f"\n\nThe commands it accepts (and nothing else): {commands}; and the control symbols {symbols} "
        "and `\\` followed by a space."
    )


PIECES.update(
    {
        "cli-reference": cli_reference,
        "limits-table": limits_table,
        "package-map": package_map,
        "title-grammar": title_grammar,
    }
)


# --- everything made, as the pages hold it -------------------------------------------------------

FIGURES = (("causal.weights.svg", "The heatmap of the weights"), ("causal.tokens.svg", "The token diagram"))


def make_all(tmp: Path, pictures: Path | None = None) -> dict[str, str]:
    """What every block of the pages holds: the pieces made by running symattn, and links to the pictures
    of compiled pages (docs/generated/NAME.png; written into ``pictures`` when given, where TeX is here)
    and to the causal example's figures (docs/causal.*.svg, kept current by tests/test_figures.py)."""
    made = {key: piece(tmp) for key, piece in PIECES.items()}
    for key, (alt, *_rest) in PICTURES.items():
        name = key.removeprefix("picture-")
        made[key] = f"![{alt}](generated/{name}.png)"
        if pictures is not None:
            png = picture(key, tmp)
            if png is not None:
                (pictures / f"{name}.png").write_bytes(png)
    made["figure-causal"] = "\n\n".join(f"![{alt}]({name})" for name, alt in FIGURES)
    return made


def pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def write(tmp: Path) -> list[str]:
    """Fill every page's blocks with what is made now, and make the pictures; the pages rewritten."""
    folder = DOCS / "generated"
    folder.mkdir(exist_ok=True)
    made = make_all(tmp, folder)
    changed = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        new = blocks.filled(text, made)
        if new != text:
            page.write_text(new, encoding="utf-8", newline="\n")
            changed.append(page.name)
    return changed


def check(tmp: Path) -> list[str]:
    """``page: block`` for every block that differs from what is made now, and every picture missing."""
    made = make_all(tmp)
    problems = [f"{p.name}: {name}" for p in pages() for name in blocks.stale(p.read_text(encoding="utf-8"), made)]
    return problems + missing_pictures()


def missing_pictures() -> list[str]:
    """``generated/NAME.png: missing`` for every picture a page links to that is not committed."""
    paths = (DOCS / "generated" / f"{key.removeprefix('picture-')}.png" for key in PICTURES)
    return [f"{path.relative_to(DOCS)}: missing" for path in paths if not path.is_file()]


# --- mkdocs events --------------------------------------------------------------------------------

_made: dict[str, str] = {}


def on_files(files, config):
    """Make every piece once per build (each page's blocks must hold them); add the offline pages."""
    _made.clear()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="symattn-docs-") as name:
        tmp = Path(name)
        _made.update(make_all(tmp))
        for lang in ("zh", "en"):  # the offline page of `render --format html`, to open from the guides
            page = symattn("render", "--lang", lang, "--format", "html", cwd=tmp)
            files.append(File.generated(config, f"generated/seed-{lang}.html", content=page.encode("utf-8")))
            deck = symattn("render", "--lang", lang, "--format", "slides", cwd=tmp)  # and its HTML deck
            files.append(File.generated(config, f"generated/seed-{lang}.slides.html", content=deck.encode("utf-8")))
    log.info("symattn docs: %d pieces made by running symattn in %.1f s", len(_made), time.monotonic() - started)
    return files


def on_page_markdown(markdown, page, config, files):
    """The page as committed, its blocks checked against what was made (a stale one stops the build)."""
    unknown = [name for name, *_ in blocks.blocks(markdown) if name not in _made]
    if unknown:
        raise PluginError(f"{page.file.src_uri}: no generated piece named {unknown[0]!r}")
    old = blocks.stale(markdown, _made)
    if old:
        raise PluginError(
            f"{page.file.src_uri}: generated blocks out of date: {', '.join(old)}; run python docs/hooks.py --write"
        )
    return blocks.unmarked(markdown)


def main(argv: list[str] | None = None) -> int:
    """``python docs/hooks.py --write``: fill the pages' blocks and make the pictures; ``--check``: list
    what is out of date and exit 1 (as ``cog --check``)."""
    parser = argparse.ArgumentParser(prog="python docs/hooks.py", description=main.__doc__)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true", help="rewrite the generated blocks and pictures")
    group.add_argument("--check", action="store_true", help="exit 1 if a block is out of date")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with tempfile.TemporaryDirectory(prefix="symattn-docs-") as name:
        if args.write:
            changed = write(Path(name))
            print("rewrote " + ", ".join(changed) if changed else "every block was current")
            return 0
        problems = check(Path(name))
    for line in problems:
        print(f"out of date: {line}", file=sys.stderr)
    if problems:
        print("run: python docs/hooks.py --write", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
