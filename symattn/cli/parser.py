"""The ``symattn`` command line's grammar: every command, option and argument type (the docs site's
command reference is generated from :func:`build_parser`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from symattn.cli.naming import suffixes
from symattn.input.errors import EXIT_INPUT, brief, shown


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, like every input error
        say(message)
        raise SystemExit(EXIT_INPUT)


def say(message: object) -> None:
    """``symattn: <message>`` on stderr, one line, whatever stderr can encode."""
    line = f"symattn: {shown(message)}\n"
    stream = sys.stderr
    try:
        stream.flush()
        stream.buffer.write(line.encode(stream.encoding or "utf-8", "backslashreplace"))
        stream.buffer.flush()
    except (AttributeError, ValueError):  # a stream without bytes (tests, IDEs)
        stream.write(line)
    except OSError:
        pass  # nowhere left to say it


def _ulps(text: str):
    from symattn.kernel.tolerance import parse_ulps

    value = parse_ulps(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected a number of ULPs such as 0.5, 2 or 1e3, got {brief(text)}")
    return value


def _max_seconds(parser: argparse.ArgumentParser) -> None:
    from symattn.input.limits import SECONDS

    parser.add_argument(
        "--max-seconds",
        type=_seconds,
        default=SECONDS,
        metavar="S",
        help=f"stop with an error after S seconds (default {SECONDS})",
    )


def _engine(parser: argparse.ArgumentParser) -> None:
    from symattn.input.choices import CJK_FONTS, ENGINES, PAPERS

    parser.add_argument(
        "--engine",
        choices=ENGINES,
        help="TeX engine for --format pdf and beamer-pdf (default: pdflatex for English in Latin-1, else xelatex)",
    )
    parser.add_argument("--paper", choices=PAPERS, help="paper of LaTeX and PDF (default: a4 for zh, letter for en)")
    parser.add_argument("--cjk-font", choices=CJK_FONTS, help="ctex's fontset for Chinese (default: ctex's own)")


def _whole(text: str) -> int:
    """A count typed on the command line: ASCII digits only (never '²' or '١٥')."""
    if not (text.isascii() and text.isdigit() and len(text) <= 9):
        raise argparse.ArgumentTypeError(f"expected a whole number, got {brief(text)}")
    return int(text)


def _heading_level(text: str) -> int:
    if text not in ("1", "2", "3"):  # ASCII only: int() would also read '３'
        raise argparse.ArgumentTypeError(f"expected 1, 2 or 3, got {brief(text)}")
    return int(text)


def _port(text: str) -> int:
    value = int(text) if text.isascii() and text.isdigit() and len(text) <= 5 else -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {brief(text)}")
    return value


def _seconds(text: str) -> float:
    from symattn.input.limits import MAX_SECONDS

    try:
        value = float(text) if text.isascii() and text.replace(".", "", 1).isdigit() else -1.0
    except ValueError:
        value = -1.0
    if not 0 < value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"expected seconds above 0 and at most {MAX_SECONDS}, got {brief(text)}")
    return value


def command_named(argv: Sequence[str]) -> str | None:
    """The command a command line names: its first word that is not an option (``symattn`` itself has
    options of none but --help and --version)."""
    return next((word for word in argv if not word.startswith("-")), None)


class _Commands:
    """The commands, each with its name and help; only ``wanted`` is given its options (None: every one, for
    ``symattn --help`` and the docs). Adding them all costs more than a render's own work (issue 29's
    start-up), and a command line parses one command."""

    def __init__(self, commands: argparse._SubParsersAction, wanted: str | None) -> None:
        self.commands = commands
        self.wanted = wanted

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        made = self.commands.add_parser(name, **kwargs)
        return made if self.wanted in (None, name) else _Unread()


class _Unread:
    """A command the command line does not name: its options are not added."""

    def add_argument(self, *args: Any, **kwargs: Any) -> None:
        pass


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command; with ``command``, of that command's options only (the others still
    show in ``symattn --help``)."""
    from symattn.input.choices import EXPANDS, FIGURES, NOTATIONS, ROUNDINGS

    parser = Parser(prog="symattn", description="Exact, step-by-step Transformer attention derivations.")
    from symattn import __version__

    parser.add_argument("--version", action="version", version=f"symattn {__version__}")
    sub = _Commands(parser.add_subparsers(dest="command", required=True, parser_class=Parser), command)

    render = sub.add_parser("render", help="render a derivation as Markdown, LaTeX, PDF or HTML")
    render.add_argument("spec", nargs="?", metavar="SPEC", help="TOML or JSON spec; default: the built-in example")
    render.add_argument("--example", metavar="NAME", help="render a built-in example (default: seed)")
    render.add_argument(
        "--format",
        choices=("markdown", "latex", "pdf", "html", "beamer", "beamer-pdf", "slides"),
        help=f"markdown (default; else the one -o's name says: {suffixes('render')}); "
        "pdf: compiled with latexmk; html: one offline page, math typeset by KaTeX; "
        "beamer: a Beamer deck (16:9, a frame per step); beamer-pdf: that deck compiled; "
        "slides: one offline HTML deck (reveal.js), the same frames",
    )
    render.add_argument(
        "--slides",
        action="store_true",
        help="a slide deck: -o FILE.pdf is the Beamer deck compiled (beamer-pdf), -o FILE.html the HTML deck "
        "(slides), otherwise the Beamer source (beamer)",
    )
    render.add_argument("--standalone", action="store_true", help="a whole LaTeX document, not a fragment")
    render.add_argument(
        "--heading-level",
        type=_heading_level,
        metavar="{1,2,3}",
        help="level of the top heading: 1 = \\section and # (default), 2 = \\subsection and ##, "
        "3 = \\subsubsection and ###; the steps one level below",
    )
    render.add_argument(
        "--numbered",
        action="store_true",
        help="LaTeX: numbered headings (\\section, not \\section*), which enter the table of contents; "
        "Markdown has no numbered headings and is unchanged",
    )
    _engine(render)
    render.add_argument("--lang", help="language of the prose: zh or en (overrides the spec)")
    render.add_argument("--focus", metavar="TOKEN", help="the token whose row is worked out (label or 1-based index)")
    render.add_argument("--expand", choices=EXPANDS)
    render.add_argument("--rounding", choices=ROUNDINGS)
    render.add_argument(
        "--notation", choices=NOTATIONS, help="auto (default): m × 10^k where |x| ≥ 10^6 or < 10^-4; fixed; scientific"
    )
    render.add_argument("--subs", action="append", metavar="NAME=VALUE", help="a value for a symbol (repeatable)")
    render.add_argument(
        "--figures",
        choices=FIGURES,
        help="all (default): a heatmap of the weights and the focus row's token diagram; weights: the heatmap "
        "only; none. LaTeX and PDF draw them with TikZ, HTML inline; Markdown with -o FILE writes them as SVG "
        "files beside it (FILE.weights.svg, ...); Markdown on stdout has no figure",
    )
    render.add_argument(
        "--backward",
        action="store_true",
        help='add the backward pass (gradients); loss = "sum" unless the spec\'s [backward] says otherwise',
    )
    render.add_argument("-o", "--output", metavar="FILE", help="write here (atomically) instead of stdout")
    _max_seconds(render)

    compute = sub.add_parser("compute", help="print every intermediate as JSON")
    compute.add_argument("spec", nargs="?", metavar="SPEC", help="TOML or JSON spec; default: the built-in example")
    compute.add_argument("--example", metavar="NAME")
    compute.add_argument("--digits", type=_whole, help="significant digits (default 15; with --float64, 10)")
    compute.add_argument("--subs", action="append", metavar="NAME=VALUE", help="a value for a symbol (repeatable)")
    compute.add_argument(
        "--backward",
        action="store_true",
        help='add the backward pass (gradients); loss = "sum" unless the spec\'s [backward] says otherwise',
    )
    compute.add_argument(
        "--no-exact", action="store_true", help="leave out the closed forms (much faster for large inputs)"
    )
    compute.add_argument(
        "--certify",
        action="store_true",
        help="add each value's deciding enclosure (bounds) and a certificate that "
        "symattn verify-certificate re-checks independently (one head)",
    )
    compute.add_argument(
        "--float64",
        action="store_true",
        help="with --certify: certify the output and the log-sum-exp (both bases) of every (batch, head) by the "
        "float64 path with rigorous bounds (float32 inputs, kernel sizes; at most 13 --digits), arb where the "
        "bound does not decide",
    )
    compute.add_argument(
        "--grad-output",
        metavar="FILE",
        help="with --certify --float64: also certify dQ, dK and dV for this dO (.npy or JSON, the shape of O)",
    )
    compute.add_argument("-o", "--output", metavar="FILE")
    _max_seconds(compute)

    check = sub.add_parser("check", help="check hand-computed numbers; exit 1 if any is wrong")
    check.add_argument("claims", nargs="?", metavar="CLAIMS", help="TOML or JSON claims file")
    check.add_argument("--example", action="store_true", help="check the worked example's own numbers")
    check.add_argument(
        "--format",
        choices=("text", "json", "markdown", "latex", "pdf", "html"),
        help=f"text (default; else the one -o's name says: {suffixes('check')})",
    )
    check.add_argument("--standalone", action="store_true", help="with --format latex: a whole document")
    _engine(check)
    check.add_argument("--lang", help="language of the report: zh or en (overrides the spec)")
    check.add_argument(
        "--backward",
        action="store_true",
        help='claims on gradients too; loss = "sum" unless the spec\'s [backward] says otherwise',
    )
    check.add_argument("-o", "--output", metavar="FILE")
    _max_seconds(check)

    exercise = sub.add_parser("exercise", help="one variant per student: sheet, key and answers.toml")
    exercise.add_argument("template", metavar="TEMPLATE", help="a spec with a [vary] table (TOML or JSON)")
    exercise.add_argument("--count", type=_whole, metavar="N", help="N students, named s01, s02, ...")
    exercise.add_argument("--roster", metavar="CSV", help="students from a CSV file with an id,name header")
    exercise.add_argument("--seed", default="0", metavar="S", help="the class seed (default 0)")
    exercise.add_argument("--lang", help="language of sheets and keys: zh or en (overrides the template)")
    exercise.add_argument(
        "--format",
        choices=("markdown", "latex", "pdf", "html", "moodle", "qti"),
        help="format of sheets and keys (default markdown); moodle: one Moodle XML question bank (-o quiz.xml), "
        "a Cloze question per variant; qti: one IMS QTI 1.2 zip for Canvas (-o quiz.zip), a quiz per variant",
    )
    exercise.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        required=True,
        help="folder to write into (a new or empty one; see --force); with --format moodle or qti, the file",
    )
    exercise.add_argument(
        "--force",
        action="store_true",
        help="write over a folder that already holds files (answers in it would be lost), or an existing quiz file",
    )
    _max_seconds(exercise)

    grade = sub.add_parser("grade", help="grade returned answers.toml files (or an LMS's responses) into a gradebook")
    grade.add_argument(
        "folder", nargs="?", metavar="DIR", help="folder of returned answers (searched recursively); or --lms-csv"
    )
    grade.add_argument(
        "--lms-csv",
        metavar="FILE",
        help="grade Moodle's Responses report (CSV, with 'Right answer' ticked) of a quiz made by exercise "
        "--format moodle; needs --template and the same --seed and --count or --roster",
    )
    grade.add_argument("--seed", metavar="S", help="with --lms-csv: the class seed the quiz was made with")
    grade.add_argument("--count", type=_whole, metavar="N", help="with --lms-csv: the quiz's --count")
    grade.add_argument("--roster", metavar="CSV", help="with --lms-csv: the quiz's --roster")
    grade.add_argument("--index", metavar="CSV", help="index.csv of the class (default: DIR/index.csv)")
    grade.add_argument(
        "--template", metavar="FILE", help="the exercise template (default: template.toml next to the index)"
    )
    grade.add_argument(
        "--format",
        choices=("csv", "markdown", "json", "latex", "html", "pdf", "moodle-grades", "canvas-grades"),
        help=f"csv (default; else the one -o's name says: {suffixes('grade')}); markdown, latex, html "
        "and pdf add the notes and the class summary; json has both; moodle-grades and canvas-grades are "
        "the CSV that Moodle's and Canvas's gradebooks import (one row per student, the best score)",
    )
    grade.add_argument(
        "--assignment-id",
        metavar="N",
        help="with --format canvas-grades: the Canvas assignment's id (in its address), so that the "
        "column is 'Title (N)'; without it Canvas matches the title, or makes a new assignment",
    )
    grade.add_argument(
        "--lang",
        help="language of the gradebook: zh or en (default en); feedback is always in each student's own language",
    )
    grade.add_argument(
        "--policy",
        metavar="FILE",
        help="scores per verdict, 0 to 1, in TOML or JSON (default: exact, rounded, carried and input-rounding 1, "
        "too-coarse and last-digit 0.5, wrong and blank 0)",
    )
    grade.add_argument("--feedback", metavar="DIR", help="also write each student's check report here, as <id>.<ext>")
    grade.add_argument(
        "--feedback-format",
        choices=("text", "markdown", "latex", "html", "pdf"),
        default="text",
        help="format of the feedback reports (default text, as symattn check prints; html is one offline page each)",
    )
    grade.add_argument(
        "--force",
        action="store_true",
        help="write feedback into a folder that already holds files (files of the same name are replaced)",
    )
    grade.add_argument("-o", "--output", metavar="FILE")
    _max_seconds(grade)

    compare = sub.add_parser(
        "compare",
        help="a float result of O, A, the LSE or a gradient (.npy, .safetensors or JSON) against the exact "
        "values, in ULPs; exit 1 past --max-ulp or on NaN",
    )
    compare.add_argument("spec", metavar="SPEC", help="the TOML or JSON spec the result was computed from")
    compare.add_argument(
        "result",
        metavar="RESULT",
        nargs="+",
        help=".npy (numpy.save of a tensor), FILE.safetensors[:NAME] or JSON (an array of rows); several "
        "results of one kernel: their bitwise spread, and each one's distance to the exact values",
    )
    compare.add_argument(
        "--quantity",
        choices=("output", "weights", "lse", "dq", "dk", "dv", "dsink"),
        default="output",
        help="what the result holds: the output O (default), the weights A, lse: each query's "
        "log-sum-exp of its scaled scores (one row per head; float32-valued inputs), or the gradient "
        "dQ, dK or dV for the dO of --grad-output, or dsink: (H,), the gradient of the spec's per-head "
        "denominator logits",
    )
    compare.add_argument(
        "--lse-base",
        choices=("e", "2"),
        default="e",
        help="the base of --quantity lse: e (default) or 2, for kernels that return log2",
    )
    compare.add_argument(
        "--dtype",
        choices=("float8_e4m3fn", "float8_e5m2", "float16", "bfloat16", "float32", "float64"),
        help="the format whose ULP measures the result: a JSON result's (default float64), or a file's whose "
        "values are all of it (a bfloat16 result saved as float32; a file says its own by default)",
    )
    compare.add_argument("--format", choices=("text", "json"), default="text")
    compare.add_argument(
        "--summary", action="store_true", help="with --format json: the summaries and verdicts, not every entry"
    )
    compare.add_argument("--all", action="store_true", help="list every entry, not only the ten largest errors")
    compare.add_argument("--max-ulp", type=_ulps, metavar="X", help="exit 1 if any error exceeds X ULP")
    compare.add_argument(
        "--grad-output",
        metavar="FILE",
        help="dO (dL/dO, the shape of O; .npy or JSON) for --quantity dq, dk, dv or dsink",
    )
    compare.add_argument(
        "--naive",
        metavar="FILE",
        help="the same formula computed in the kernel's dtype (same shape): FlashAttention's ratio "
        "max|out − exact| / max|naive − exact|, and its rule max|out − exact| ≤ rtol·max|naive − exact| + atol "
        "(rtol 2, atol 0 by default); exit 1 when it fails",
    )
    compare.add_argument(
        "--rtol",
        metavar="R",
        help="with --naive: FlashAttention's factor (default 2); alone or with --atol: torch.allclose's rule "
        "|out − exact| ≤ atol + rtol·|exact| for every entry (default 1e-5); exit 1 when it fails",
    )
    compare.add_argument(
        "--atol", metavar="A", help="the absolute tolerance of either rule (default 0 with --naive, else 1e-8)"
    )
    compare.add_argument(
        "--partials",
        action="store_true",
        help="RESULT is a split-KV kernel's .safetensors file: partials_out (splits, B, H, N, D) and partials_lse "
        "(splits, B, H, N), as FlashAttention's num_splits holds them, and the merged out and lse if given",
    )
    compare.add_argument(
        "--splits",
        metavar="S",
        help="with --partials: the count of splits (⌈keys / S⌉ keys each) or their key offsets, 0,40,100 "
        "(default: partials_out's first axis, as a count)",
    )
    compare.add_argument("--lang", help="language of the text report: zh or en (default en)")
    compare.add_argument("-o", "--output", metavar="FILE")
    _max_seconds(compare)

    sweep = sub.add_parser(
        "sweep",
        help="a kernel's whole test grid (GRID.toml) against the exact values, case by case on Dask workers; "
        "exit 1 if any case fails",
    )
    sweep.add_argument("grid", metavar="GRID", help="TOML or JSON: a [grid] table of lists, seed, rule, kinds")
    sweep.add_argument(
        "--kernel",
        required=True,
        metavar="MODULE:FUNCTION",
        help="f(q, k, v, *, causal, scale, **variant) -> out or (out, lse), on torch tensors; imported on the workers",
    )
    sweep.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="a running Dask cluster's scheduler, tcp://HOST:PORT (default: a local cluster on this machine's cores)",
    )
    sweep.add_argument("--format", choices=("text", "json"), default="text", help="the report on stdout")
    sweep.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="the sweep's record: a JSON line per finished case, each fsync'd as it finishes (see --resume)",
    )
    sweep.add_argument(
        "--resume", action="store_true", help="go on from -o FILE's record: its finished cases are not run again"
    )
    sweep.add_argument(
        "--case-seconds",
        type=_seconds,
        metavar="S",
        help="a case still running after S seconds fails, and its worker is restarted (default: no limit)",
    )

    verify = sub.add_parser(
        "verify-certificate",
        help="re-check compute --certify's bounds with mpmath intervals (with --float64: its floats and bounds "
        "recomputed); exit 1 if any value is not proved",
    )
    verify.add_argument("certificate", metavar="FILE", help="the JSON of symattn compute --certify")
    _max_seconds(verify)

    serve = sub.add_parser("serve", help="a local web page: edit the numbers, watch the derivation and the check")
    serve.add_argument(
        "spec", nargs="?", metavar="SPEC", help="TOML or JSON spec to open (default: the built-in example)"
    )
    serve.add_argument("--port", type=_port, default=8765, help="port (default 8765; 0 picks a free one)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1, loopback only)")
    serve.add_argument(
        "--allow-remote",
        action="store_true",
        help="needed for a --host that is not loopback: anyone who can reach it can use the page",
    )
    serve.add_argument("--open", action="store_true", help="open the page in the default browser")
    # not --max-seconds's dest: that one bounds the whole command, this one each request
    serve.add_argument(
        "--max-seconds",
        dest="request_seconds",
        type=_seconds,
        default=None,
        metavar="S",
        help="time limit of each request's computation (default: the limits module's)",
    )

    example = sub.add_parser("example", help="print a built-in spec as TOML, to copy and edit")
    example.add_argument("--lang", default="zh", help="zh (default) or en")
    example.add_argument("--name", default="seed", help="which example (default: seed)")
    example.add_argument("-o", "--output", metavar="FILE")
    return parser
