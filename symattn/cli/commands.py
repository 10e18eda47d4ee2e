"""The ``symattn`` command: a thin shell over the public functions.

Bad input (any :class:`~symattn.input.errors.SymattnError`) prints one line,
``symattn: <message>``, and exits 2. Real bugs still show a traceback.
Each command imports only what it needs, to start fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager, nullcontext
from typing import Callable, Iterator, Sequence

from symattn.input.errors import EXIT_BROKEN_PIPE, EXIT_INPUT, EXIT_INTERRUPTED, OutputError, SymattnError, shown


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, like every input error
        _say(message)
        raise SystemExit(EXIT_INPUT)


class _UsageError(SymattnError, ValueError):
    pass


def _say(message: object) -> None:
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


def _emit(document: str | bytes, output: str | None) -> None:
    """The document (text goes out as UTF-8 whatever the locale; a PDF as it is) to ``-o`` or stdout."""
    if output is not None:
        from symattn.rendering.output import write_output
        write_output(output, document)
        return
    data = document if isinstance(document, bytes) else document.encode("utf-8")
    stream = sys.stdout
    try:
        stream.flush()
        stream.buffer.write(data)
        stream.buffer.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputError.from_os("<stdout>", exc) from None


def _load(spec_path: str | None, example: str | None, lang: str | None):
    from symattn.input import builtin
    from symattn.input.spec import load_spec
    if spec_path and example:
        raise _UsageError("give a SPEC file or --example, not both")
    if spec_path:
        return load_spec(spec_path)
    return load_spec(builtin.example_path(example or builtin.DEFAULT, lang or "zh"))


def _render(args: argparse.Namespace) -> int:
    from symattn.derivation.derive import derive
    from symattn.rendering.renderer import render
    fmt = args.format = _format(args, "markdown")
    if args.standalone and fmt not in ("latex", "pdf"):  # a PDF is always made from a whole document
        raise _UsageError("--standalone needs --format latex")
    _check_export(args)
    spec = _load(args.spec, args.example, args.lang).with_options(
        lang=args.lang, focus=args.focus, expand=args.expand, rounding=args.rounding, subs=_subs(args.subs),
        notation=args.notation, paper=args.paper, engine=args.engine, cjk_font=args.cjk_font, backward=args.backward)
    derivation = derive(spec)
    if fmt == "html":
        from symattn.rendering.html import derivation_page
        _emit(derivation_page(derivation), args.output)
    elif fmt == "pdf":
        _emit_pdf(render(derivation, "latex", standalone=True), derivation.lang, spec.engine, args)
    else:
        _emit(render(derivation, fmt, standalone=args.standalone), args.output)
    return 0


def _format(args: argparse.Namespace, default: str) -> str:
    """--format, else what -o's name says for a PDF or a web page (-o x.pdf, -o x.html), else ``default``."""
    if args.format:
        return args.format
    suffix = os.path.splitext(args.output or "")[1].lower()
    return {".pdf": "pdf", ".html": "html", ".htm": "html"}.get(suffix, default)


def _check_export(args: argparse.Namespace) -> None:
    """--engine only with a PDF; a PDF never goes to a terminal. Checked before any work."""
    if getattr(args, "engine", None) and args.format != "pdf":
        raise _UsageError("--engine needs --format pdf")
    if args.format == "pdf" and args.output is None and _is_terminal(sys.stdout):
        raise _UsageError("a PDF is binary and stdout is a terminal; write it to a file with -o FILE.pdf")


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _emit_pdf(tex: str, lang: str, engine: str | None, args: argparse.Namespace) -> None:
    from symattn.rendering.pdf import latex_to_pdf
    with _latex_clock():
        data = latex_to_pdf(tex, engine=engine, lang=lang)
    _emit(data, args.output)


@contextmanager
def _latex_clock() -> Iterator[None]:
    """TeX has its own time limit (limits.LATEX_SECONDS): --max-seconds stops counting while it runs."""
    import signal
    import threading
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return
    remaining, interval = signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        yield
    finally:
        if remaining:
            signal.setitimer(signal.ITIMER_REAL, remaining, interval)


def _subs(pairs: list[str] | None) -> dict[str, str] | None:
    """--subs a=0.5 --subs b=1/3 as a mapping; values are parsed by the spec reader."""
    if not pairs:
        return None
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise _UsageError(f"--subs: expected NAME=VALUE, got {pair!r}")
        out[name.strip()] = value.strip()
    return out


def _compute(args: argparse.Namespace) -> int:
    from symattn.derivation.intermediates import MAX_DIGITS, compute_json
    if not 1 <= args.digits <= MAX_DIGITS:
        raise _UsageError(f"--digits: expected an integer from 1 to {MAX_DIGITS}, got {args.digits}")
    spec = _load(args.spec, args.example, None).with_options(subs=_subs(args.subs), backward=args.backward)
    # one key per line, each value compact: matrices stay readable and diffable; as bytes, made section
    # by section, so that no section's strings outlive it
    parts = compute_json(spec, digits=args.digits, exact=not args.no_exact, certify=args.certify)
    _emit(b"".join(part.encode("utf-8") for part in parts), args.output)
    return 0


def _example(args: argparse.Namespace) -> int:
    from symattn.input import builtin
    _emit(builtin.example_text(args.name, args.lang, "--name"), args.output)
    return 0


def _check(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from symattn.input import builtin
    from symattn.checking.checker import check, report_data
    if bool(args.claims) == bool(args.example):
        raise _UsageError("give a CLAIMS file or --example (not both)")
    args.format = _format(args, "text")
    _check_export(args)
    if args.example:
        path = builtin.example_path("seed-claims", args.lang or "zh")
        report = replace(check(None, str(path), backward=args.backward), source=path.name, builtin=True)
    else:
        report = check(None, args.claims, backward=args.backward)
    if args.lang:
        report = replace(report, lang=_language(args.lang))
    if args.paper or args.cjk_font or args.engine:
        report = replace(report, paper=args.paper or report.paper, cjk_font=args.cjk_font or report.cjk_font,
                         engine=args.engine or report.engine)
    if args.format == "json":
        import json
        _emit(json.dumps(report_data(report), ensure_ascii=False, indent=2) + "\n", args.output)
    elif args.format == "html":
        from symattn.rendering.html import report_page
        _emit(report_page(report), args.output)
    elif args.format == "pdf":
        from symattn.rendering.renderer import render_report
        _emit_pdf(render_report(report, "latex", standalone=True), report.lang, report.engine, args)
    else:
        from symattn.rendering.renderer import render_report
        _emit(render_report(report, args.format, standalone=args.standalone), args.output)
    return 0 if report.ok else 1


def _exercise(args: argparse.Namespace) -> int:
    from symattn.classroom.exercises import exercise, load_template, read_roster, write_class
    from symattn.input.limits import STUDENTS
    if (args.count is None) == (args.roster is None):
        raise _UsageError("give --count N or --roster FILE (not both)")
    if args.count is not None:
        if not 1 <= args.count <= STUDENTS:
            raise _UsageError(f"--count: expected 1 to {STUDENTS}, got {args.count}")
        width = max(2, len(str(args.count)))
        students = [(f"s{i:0{width}d}", "") for i in range(1, args.count + 1)]
    else:
        students = read_roster(args.roster)
    variants = exercise(load_template(args.template), students, args.seed, _progress("drawing"))
    write_class(variants, args.output, args.template, args.format or "markdown",
                _language(args.lang) if args.lang else None, _progress(f"writing {args.format or 'markdown'}"),
                force=args.force)
    return 0


@contextmanager
def _steps(label: str) -> Iterator[None]:
    """For a long render, compute or check on a terminal: a counter of the steps done (each quantity rounded,
    each claim checked), shown once the run has taken half a second (SYMATTN_PROGRESS_DELAY seconds); nothing
    when stderr is not a terminal."""
    if not _is_terminal(sys.stderr):
        yield
        return
    from tqdm import tqdm

    from symattn.exact.progress import listening
    text = os.environ.get("SYMATTN_PROGRESS_DELAY", "")
    delay = float(text) if text.replace(".", "", 1).isdigit() else 0.5
    bar = tqdm(desc=label, unit=" steps", delay=delay, leave=False, file=sys.stderr, dynamic_ncols=True)

    def done(what: str) -> None:
        bar.set_postfix_str(what, refresh=False)
        bar.update()
    try:
        with listening(done):
            yield
    finally:
        bar.close()


def _progress(label: str) -> Callable | None:
    """A progress bar for a batch, on stderr when it is a terminal; None (silence) otherwise."""
    if not _is_terminal(sys.stderr):
        return None
    from tqdm import tqdm

    def bar(items):
        return tqdm(items, desc=label, unit="student", leave=False, file=sys.stderr, dynamic_ncols=True)
    return bar


def _grade(args: argparse.Namespace) -> int:
    from symattn.classroom.grading import POLICY, feedback_files, grade, gradebook_document, read_policy, write_feedback
    fmt = args.format = _format(args, "csv")
    _check_export(args)
    lang = _language(args.lang) if args.lang else "en"
    policy = read_policy(args.policy) if args.policy else POLICY
    book = grade(args.folder, args.index, args.template, policy, _progress("grading"))
    with _latex_clock() if "pdf" in (fmt, args.feedback_format) else nullcontext():
        document = gradebook_document(book, fmt, lang)
        made = feedback_files(book, args.feedback_format) if args.feedback else ()
    if args.feedback:  # everything is made before anything is written
        write_feedback(made, args.feedback, args.force)
    _emit(document, args.output)
    return 0


def _compare(args: argparse.Namespace) -> int:
    import json

    from symattn.checking.compare import compare, comparison_data, render_comparison
    from symattn.input.floats import read_result
    from symattn.input.spec import load_spec
    spec = load_spec(args.spec)
    comparison = compare(spec, read_result(args.result, args.dtype), args.quantity)
    if args.format == "json":
        _emit(json.dumps(comparison_data(comparison), ensure_ascii=False, indent=2) + "\n", args.output)
    else:
        _emit(render_comparison(comparison, _language(args.lang) if args.lang else "en", args.all), args.output)
    worst = comparison.worst
    over = args.max_ulp is not None and worst is not None and worst.ulps > args.max_ulp
    return 1 if over or comparison.not_finite else 0


def _verify(args: argparse.Namespace) -> int:
    from symattn.checking.certificate import verify
    from symattn.input.spec import read_table
    result = verify(read_table(args.certificate), args.certificate)
    for line in result.failures:
        _say(f"{args.certificate}: {line}")
    if result.ok:
        _emit(f"{args.certificate}: {result.checked} values verified: each exact value lies in its bounds, and "
              "every point of the bounds rounds to the value shown\n", None)
        return 0
    return 1


def _ulps(text: str):
    from decimal import Decimal, InvalidOperation
    try:
        value = Decimal(text) if text.isascii() and text.replace(".", "", 1).isdigit() else None
    except InvalidOperation:
        value = None
    if value is None:
        raise argparse.ArgumentTypeError(f"expected a number of ULPs such as 0.5 or 2, got {text!r}")
    return value


def _serve(args: argparse.Namespace) -> int:
    from symattn.web.serve import serve  # the web extra is imported only here; serve says how to install it
    return serve(args)


def _language(lang: str) -> str:
    from symattn.input.spec import _Reader
    return _Reader("--lang").lang(lang, "--lang")


def _max_seconds(parser: argparse.ArgumentParser) -> None:
    from symattn.input.limits import SECONDS
    parser.add_argument("--max-seconds", type=_seconds, default=SECONDS, metavar="S",
                        help=f"stop with an error after S seconds (default {SECONDS})")


def _engine(parser: argparse.ArgumentParser) -> None:
    from symattn.input.choices import CJK_FONTS, ENGINES, PAPERS
    parser.add_argument("--engine", choices=ENGINES,
                        help="TeX engine for --format pdf (default: xelatex for Chinese text, else pdflatex)")
    parser.add_argument("--paper", choices=PAPERS, help="paper of LaTeX and PDF (default: a4 for zh, letter for en)")
    parser.add_argument("--cjk-font", choices=CJK_FONTS, help="ctex's fontset for Chinese (default: ctex's own)")


def _whole(text: str) -> int:
    """A count typed on the command line: ASCII digits only (never '²' or '١٥')."""
    if not (text.isascii() and text.isdigit() and len(text) <= 9):
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    return int(text)


def _port(text: str) -> int:
    value = int(text) if text.isascii() and text.isdigit() and len(text) <= 5 else -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {text!r}")
    return value


def _seconds(text: str) -> float:
    from symattn.input.limits import MAX_SECONDS
    try:
        value = float(text) if text.isascii() and text.replace(".", "", 1).isdigit() else -1.0
    except ValueError:
        value = -1.0
    if not 0 < value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"expected seconds above 0 and at most {MAX_SECONDS}, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from symattn.input.choices import EXPANDS, NOTATIONS, ROUNDINGS
    parser = _Parser(prog="symattn", description="Exact, step-by-step Transformer attention derivations.")
    from symattn import __version__
    parser.add_argument("--version", action="version", version=f"symattn {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    render = sub.add_parser("render", help="render a derivation as Markdown or LaTeX")
    render.add_argument("spec", nargs="?", metavar="SPEC", help="TOML or JSON spec; default: the built-in example")
    render.add_argument("--example", metavar="NAME", help="render a built-in example (default: seed)")
    render.add_argument("--format", choices=("markdown", "latex", "pdf", "html"),
                        help="markdown (default; pdf or html when -o names a .pdf or .html file); "
                             "pdf: compiled with latexmk; html: one offline page, math typeset by KaTeX")
    render.add_argument("--standalone", action="store_true", help="a whole LaTeX document, not a fragment")
    _engine(render)
    render.add_argument("--lang", help="language of the prose: zh or en (overrides the spec)")
    render.add_argument("--focus", metavar="TOKEN", help="the token whose row is worked out (label or 1-based index)")
    render.add_argument("--expand", choices=EXPANDS)
    render.add_argument("--rounding", choices=ROUNDINGS)
    render.add_argument("--notation", choices=NOTATIONS,
                        help="auto (default): m × 10^k where |x| ≥ 10^6 or < 10^-4; fixed; scientific")
    render.add_argument("--subs", action="append", metavar="NAME=VALUE", help="a value for a symbol (repeatable)")
    render.add_argument("--backward", action="store_true",
                        help="add the backward pass (gradients); loss = \"sum\" unless "
                             "the spec's [backward] says otherwise")
    render.add_argument("-o", "--output", metavar="FILE", help="write here (atomically) instead of stdout")
    _max_seconds(render)
    render.set_defaults(run=_render)

    compute = sub.add_parser("compute", help="print every intermediate as JSON")
    compute.add_argument("spec", nargs="?", metavar="SPEC", help="TOML or JSON spec; default: the built-in example")
    compute.add_argument("--example", metavar="NAME")
    compute.add_argument("--digits", type=_whole, default=15, help="significant digits (default 15)")
    compute.add_argument("--subs", action="append", metavar="NAME=VALUE", help="a value for a symbol (repeatable)")
    compute.add_argument("--backward", action="store_true",
                         help="add the backward pass (gradients); loss = \"sum\" unless "
                              "the spec's [backward] says otherwise")
    compute.add_argument("--no-exact", action="store_true",
                         help="leave out the closed forms (much faster for large inputs)")
    compute.add_argument("--certify", action="store_true",
                         help="add each value's deciding enclosure (bounds) and a certificate that "
                              "symattn verify-certificate re-checks independently (one head)")
    compute.add_argument("-o", "--output", metavar="FILE")
    _max_seconds(compute)
    compute.set_defaults(run=_compute)

    check = sub.add_parser("check", help="check hand-computed numbers; exit 1 if any is wrong")
    check.add_argument("claims", nargs="?", metavar="CLAIMS", help="TOML or JSON claims file")
    check.add_argument("--example", action="store_true", help="check the worked example's own numbers")
    check.add_argument("--format", choices=("text", "json", "markdown", "latex", "pdf", "html"),
                       help="text (default; pdf or html when -o names a .pdf or .html file)")
    check.add_argument("--standalone", action="store_true", help="with --format latex: a whole document")
    _engine(check)
    check.add_argument("--lang", help="language of the report: zh or en (overrides the spec)")
    check.add_argument("--backward", action="store_true",
                       help="claims on gradients too; loss = \"sum\" unless the spec's [backward] says otherwise")
    check.add_argument("-o", "--output", metavar="FILE")
    _max_seconds(check)
    check.set_defaults(run=_check)

    exercise = sub.add_parser("exercise", help="one variant per student: sheet, key and answers.toml")
    exercise.add_argument("template", metavar="TEMPLATE", help="a spec with a [vary] table (TOML or JSON)")
    exercise.add_argument("--count", type=_whole, metavar="N", help="N students, named s01, s02, ...")
    exercise.add_argument("--roster", metavar="CSV", help="students from a CSV file with an id,name header")
    exercise.add_argument("--seed", default="0", metavar="S", help="the class seed (default 0)")
    exercise.add_argument("--lang", help="language of sheets and keys: zh or en (overrides the template)")
    exercise.add_argument("--format", choices=("markdown", "latex", "pdf", "html"),
                          help="format of sheets and keys (default markdown)")
    exercise.add_argument("-o", "--output", metavar="DIR", required=True,
                          help="folder to write into (a new or empty one; see --force)")
    exercise.add_argument("--force", action="store_true",
                          help="write over a folder that already holds files (answers in it would be lost)")
    _max_seconds(exercise)
    exercise.set_defaults(run=_exercise)

    grade = sub.add_parser("grade", help="grade returned answers.toml files into a gradebook")
    grade.add_argument("folder", metavar="DIR", help="folder of returned answers (searched recursively)")
    grade.add_argument("--index", metavar="CSV", help="index.csv of the class (default: DIR/index.csv)")
    grade.add_argument("--template", metavar="FILE",
                       help="the exercise template (default: template.toml next to the index)")
    grade.add_argument("--format", choices=("csv", "markdown", "json", "latex", "html", "pdf"),
                       help="csv (default; pdf or html when -o names a .pdf or .html file); markdown, latex, html "
                            "and pdf add the notes and the class summary; json has both")
    grade.add_argument("--lang", help="language of the gradebook: zh or en (default en); feedback is always in "
                                      "each student's own language")
    grade.add_argument("--policy", metavar="FILE",
                       help="scores per verdict, 0 to 1, in TOML or JSON (default: exact, rounded and carried 1, "
                            "last-digit 0.5, wrong and blank 0)")
    grade.add_argument("--feedback", metavar="DIR", help="also write each student's check report here, as <id>.<ext>")
    grade.add_argument("--feedback-format", choices=("text", "markdown", "latex", "html", "pdf"), default="text",
                       help="format of the feedback reports (default text, as symattn check prints; "
                            "html is one offline page each)")
    grade.add_argument("--force", action="store_true",
                       help="write feedback into a folder that already holds files (files of the same name are "
                            "replaced)")
    grade.add_argument("-o", "--output", metavar="FILE")
    _max_seconds(grade)
    grade.set_defaults(run=_grade)

    compare = sub.add_parser("compare", help="a float result of O or A (.npy or JSON) against the exact values, "
                                             "in ULPs; exit 1 past --max-ulp or on NaN")
    compare.add_argument("spec", metavar="SPEC", help="the TOML or JSON spec the result was computed from")
    compare.add_argument("result", metavar="RESULT", help=".npy (float16, float32 or float64; numpy.save of a "
                                                          "tensor) or JSON (an array of rows)")
    compare.add_argument("--quantity", choices=("output", "weights"), default="output",
                         help="what the result holds: the output O (default) or the weights A")
    compare.add_argument("--dtype", choices=("float16", "bfloat16", "float32", "float64"),
                         help="the format whose ULP measures a JSON result (default float64; a .npy file says its own)")
    compare.add_argument("--format", choices=("text", "json"), default="text")
    compare.add_argument("--all", action="store_true", help="list every entry, not only the ten largest errors")
    compare.add_argument("--max-ulp", type=_ulps, metavar="X", help="exit 1 if any error exceeds X ULP")
    compare.add_argument("--lang", help="language of the text report: zh or en (default en)")
    compare.add_argument("-o", "--output", metavar="FILE")
    _max_seconds(compare)
    compare.set_defaults(run=_compare)

    verify = sub.add_parser("verify-certificate", help="re-check compute --certify's bounds with mpmath intervals; "
                                                       "exit 1 if any value is not proved")
    verify.add_argument("certificate", metavar="FILE", help="the JSON of symattn compute --certify")
    _max_seconds(verify)
    verify.set_defaults(run=_verify)

    serve = sub.add_parser("serve", help="a local web page: edit the numbers, watch the derivation and the check")
    serve.add_argument("spec", nargs="?", metavar="SPEC",
                       help="TOML or JSON spec to open (default: the built-in example)")
    serve.add_argument("--port", type=_port, default=8765, help="port (default 8765; 0 picks a free one)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1, loopback only)")
    serve.add_argument("--allow-remote", action="store_true",
                       help="needed for a --host that is not loopback: anyone who can reach it can use the page")
    serve.add_argument("--open", action="store_true", help="open the page in the default browser")
    # not --max-seconds's dest: that one bounds the whole command, this one each request
    serve.add_argument("--max-seconds", dest="request_seconds", type=_seconds, default=None, metavar="S",
                       help="time limit of each request's computation (default: the limits module's)")
    serve.set_defaults(run=_serve)

    example = sub.add_parser("example", help="print a built-in spec as TOML, to copy and edit")
    example.add_argument("--lang", default="zh", help="zh (default) or en")
    example.add_argument("--name", default="seed", help="which example (default: seed)")
    example.add_argument("-o", "--output", metavar="FILE")
    example.set_defaults(run=_example)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # --help, --version, or a usage error already said
            return exc.code if isinstance(exc.code, int) else EXIT_INPUT
        run: Callable[[argparse.Namespace], int] = args.run
        if not hasattr(args, "max_seconds"):
            return run(args)
        from symattn.input.limits import deadline
        with deadline(args.max_seconds, getattr(args, "spec", None) or getattr(args, "claims", None) or \
                getattr(args, "template", None) or getattr(args, "folder", None) or \
                getattr(args, "certificate", None) or args.command):
            with _steps(args.command) if args.command in ("render", "compute", "check") else nullcontext():
                return run(args)
    except SymattnError as exc:
        _say(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        _say("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `symattn render | head`: stop quietly, as the shell's own tools do
        _quiet_stdout()
        return EXIT_BROKEN_PIPE


def _quiet_stdout() -> None:
    # Python flushes stdout again at exit; point it at nothing so that flush cannot fail too
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):
        pass
