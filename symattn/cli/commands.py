"""The ``symattn`` command: a thin shell over the public functions.

Bad input (any :class:`~symattn.input.errors.SymattnError`) prints one line,
``symattn: <message>``, and exits 2. Real bugs still show a traceback.
Each command imports only what it needs, to start fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING

from symattn.cli.naming import NAMED, named_format
from symattn.cli.parser import build_parser, command_named, say
from symattn.cli.terminal import counter, is_terminal, progress, steps
from symattn.input.errors import EXIT_BROKEN_PIPE, EXIT_INPUT, EXIT_INTERRUPTED, OutputError, SymattnError, brief, shown

if TYPE_CHECKING:
    from symattn.rendering.export import Export


class _UsageError(SymattnError, ValueError):
    pass


def _emit(document: str | bytes | Iterable[bytes], output: str | None) -> None:
    """The document (text goes out as UTF-8 whatever the locale; a PDF as it is; pieces of bytes as they are
    made, whole before any of it is written) to ``-o`` or stdout."""
    from symattn.rendering.output import pieces, spooled, write_output

    if output is not None:
        write_output(output, document)
        return
    data = document.encode("utf-8") if isinstance(document, str) else spooled(document)
    stream = sys.stdout
    try:
        stream.flush()
        for piece in pieces(data):
            stream.buffer.write(piece)
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
    from symattn.rendering.export import export

    fmt = args.format = _slides(args) if args.slides else _format(args, "markdown", NAMED["render"])
    if args.standalone and fmt not in ("latex", "pdf"):  # a PDF is always made from a whole document
        raise _UsageError("--standalone needs --format latex")
    _check_export(args)
    spec = _load(args.spec, args.example, args.lang).with_options(
        lang=args.lang,
        focus=args.focus,
        expand=args.expand,
        rounding=args.rounding,
        subs=_subs(args.subs),
        notation=args.notation,
        paper=args.paper,
        engine=args.engine,
        cjk_font=args.cjk_font,
        backward=args.backward,
        heading_level=args.heading_level,
        numbered=True if args.numbered else None,  # absent: as the spec says
        figures=args.figures,
    )
    derivation = derive(spec)
    # Markdown to a file takes its figures beside it, as SVG files it links to
    beside = args.output if fmt == "markdown" and args.output is not None and _has_room_beside(args.output) else None
    _emit_export(export(derivation, fmt, standalone=args.standalone, beside=beside), args.output)
    return 0


def _has_room_beside(path: str) -> bool:
    from symattn.rendering.output import is_file_name

    return is_file_name(path)


def _format(args: argparse.Namespace, default: str, formats: tuple[str, ...] = ("pdf", "html")) -> str:
    """--format, else what -o's name says among the command's ``formats`` (cli/naming.py), else ``default``."""
    if args.format:
        return args.format
    fmt, problem = named_format(args.output, default, formats)
    if problem:
        raise _UsageError(problem)
    return fmt


def _slides(args: argparse.Namespace) -> str:
    """--slides: the deck in the format -o's name says (x.pdf: compiled, x.html: the HTML deck), else Beamer."""
    fmt = _format(args, "beamer", ("pdf", "html", "latex"))
    decks = {"pdf": "beamer-pdf", "html": "slides", "latex": "beamer"}
    if fmt not in (*decks, *decks.values()):
        raise _UsageError(f"--slides makes a deck: beamer, beamer-pdf or slides, not --format {fmt}")
    return decks.get(fmt, fmt)


def _check_export(args: argparse.Namespace) -> None:
    """--engine only with a PDF; a PDF never goes to a terminal. Checked before any work."""
    pdf = args.format in ("pdf", "beamer-pdf")
    if getattr(args, "engine", None) and not pdf:
        raise _UsageError("--engine needs --format pdf")
    if pdf and args.output is None and is_terminal(sys.stdout):
        raise _UsageError("a PDF is binary and stdout is a terminal; write it to a file with -o FILE.pdf")


def _emit_export(made: Export, output: str | None) -> None:
    """An export to ``-o`` or stdout, with the files that go beside it (a Markdown document's figures)."""
    if made.files and output is not None:
        from symattn.rendering.output import write_beside

        write_beside(output, made.content, made.files)
    else:
        _emit(made.content, output)


def _subs(pairs: list[str] | None) -> dict[str, str] | None:
    """--subs a=0.5 --subs b=1/3 as a mapping; values are parsed by the spec reader."""
    if not pairs:
        return None
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise _UsageError(f"--subs: expected NAME=VALUE, got {brief(pair)}")
        out[name.strip()] = value.strip()
    return out


def _compute(args: argparse.Namespace) -> int:
    from symattn.derivation.intermediates import MAX_DIGITS, compute_json

    digits = args.digits if args.digits is not None else 10 if args.float64 else 15
    if not 1 <= digits <= MAX_DIGITS:
        raise _UsageError(f"--digits: expected an integer from 1 to {MAX_DIGITS}, got {digits}")
    spec = _load(args.spec, args.example, None).with_options(subs=_subs(args.subs), backward=args.backward)
    # one key per line, each value compact: matrices stay readable and diffable; as bytes, made section
    # by section, so that no section's strings outlive it
    if args.grad_output is not None and not args.float64:
        raise _UsageError("--grad-output: the dO of a --float64 certificate's gradients; give --certify --float64")
    if args.float64:
        from symattn.certificates.tensor_maker import compute_tensors

        if not args.certify:
            raise _UsageError("--float64: it makes a certificate; give --certify too")
        parts = compute_tensors(spec, digits, _folder(args.output), args.grad_output)
    else:
        parts = compute_json(
            spec, digits=digits, exact=not args.no_exact, certify=args.certify, folder=_folder(args.output)
        )
    _emit((part.encode("utf-8") for part in parts), args.output)
    return 0


def _folder(output: str | None) -> str:
    """The folder a certificate is written to, which its file paths are relative to: -o's (a file's), or the
    current one (stdout, a device, a FIFO: wherever it is kept, most likely here)."""
    from symattn.rendering.output import is_file_name

    return os.path.dirname(output) or "." if output is not None and is_file_name(output) else "."


def _example(args: argparse.Namespace) -> int:
    from symattn.input import builtin

    _emit(builtin.example_text(args.name, args.lang, "--name"), args.output)
    return 0


def _check(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from symattn.checking.checker import check
    from symattn.input import builtin
    from symattn.rendering.export import export

    if bool(args.claims) == bool(args.example):
        raise _UsageError("give a CLAIMS file or --example (not both)")
    args.format = _format(args, "text", NAMED["check"])
    _check_export(args)
    if args.example:
        path = builtin.example_path("seed-claims", args.lang or "zh")
        report = replace(check(None, str(path), backward=args.backward), source=path.name, builtin=True)
    else:
        report = check(None, args.claims, backward=args.backward)
    if args.lang:
        report = replace(report, lang=_language(args.lang))
    if args.paper or args.cjk_font or args.engine:
        report = replace(
            report,
            paper=args.paper or report.paper,
            cjk_font=args.cjk_font or report.cjk_font,
            engine=args.engine or report.engine,
        )
    _emit_export(export(report, args.format, standalone=args.standalone), args.output)
    return 0 if report.ok else 1


def _exercise(args: argparse.Namespace) -> int:
    from symattn.classroom.exercises import exercise, write_class
    from symattn.classroom.template import load_template

    variants = exercise(load_template(args.template), _students(args), args.seed, progress("drawing"))
    if args.format in ("moodle", "qti"):  # one file, not a class folder
        from symattn.classroom.lms import quiz_file

        lang = _language(args.lang) if args.lang else None
        _refuse_existing(args.output, args.force)
        _emit(quiz_file(variants, args.format, lang), args.output)
        return 0
    write_class(
        variants,
        args.output,
        args.template,
        args.format or "markdown",
        _language(args.lang) if args.lang else None,
        progress(f"writing {args.format or 'markdown'}"),
        force=args.force,
    )
    return 0


def _students(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The class of --count N (s01, s02, ...) or --roster FILE."""
    from symattn.classroom.roster import read_roster
    from symattn.input.limits import STUDENTS

    if (args.count is None) == (args.roster is None):
        raise _UsageError("give --count N or --roster FILE (not both)")
    if args.count is not None:
        if not 1 <= args.count <= STUDENTS:
            raise _UsageError(f"--count: expected 1 to {STUDENTS}, got {args.count}")
        width = max(2, len(str(args.count)))
        return [(f"s{i:0{width}d}", "") for i in range(1, args.count + 1)]
    return read_roster(args.roster)


def _refuse_existing(path: str, force: bool) -> None:
    # a quiz file may be one the class already took: replaced only when asked
    if not force and os.path.lexists(path):
        raise _UsageError(f"{path}: already exists; give --force to replace it")


def _grade(args: argparse.Namespace) -> int:
    from symattn.classroom.gradebook import feedback_files, gradebook_document, nothing_graded, write_feedback
    from symattn.classroom.grading import POLICY, grade, read_policy
    from symattn.classroom.lmsexport import left_out_line

    fmt = args.format = _format(args, "csv", NAMED["grade"])
    _check_export(args)
    if args.assignment_id is not None and (fmt != "canvas-grades" or not args.assignment_id.isdecimal()):
        raise _UsageError("--assignment-id takes the digits of a Canvas assignment's id, with --format canvas-grades")
    lang = _language(args.lang) if args.lang else "en"
    policy = read_policy(args.policy) if args.policy else POLICY
    if args.lms_csv is not None:
        from symattn.classroom.exercises import exercise
        from symattn.classroom.lmsgrade import grade_lms

        if args.folder is not None:
            raise _UsageError("give a folder of returned answers or --lms-csv, not both")
        if args.index is not None:
            raise _UsageError("--index goes with a folder of returned answers; --lms-csv takes --seed and --count")
        if args.template is None or args.seed is None:
            raise _UsageError("--lms-csv needs --template and --seed (those the quiz was made with)")
        if args.feedback:
            raise _UsageError("--feedback needs returned answers files; an LMS gives its own feedback")
        variants = exercise(args.template, _students(args), args.seed, progress("drawing"))
        book = grade_lms(args.lms_csv, variants, policy)
    else:
        if args.folder is None:
            raise _UsageError("give a folder of returned answers, or --lms-csv FILE")
        if args.seed is not None or args.count is not None or args.roster is not None:
            raise _UsageError("--seed, --count and --roster go with --lms-csv; a class folder has its index.csv")
        book = grade(args.folder, args.index, args.template, policy, progress("grading"))
    from symattn.rendering.export import tex_clock

    with tex_clock() if "pdf" in (fmt, args.feedback_format) else nullcontext():
        document = gradebook_document(book, fmt, lang, args.assignment_id)
        made = feedback_files(book, args.feedback_format) if args.feedback else ()
    if args.feedback:  # everything is made before anything is written
        write_feedback(made, args.feedback, args.force)
    _emit(document, args.output)
    for line in (nothing_graded(book, "answers file" if args.lms_csv is None else "attempt"), left_out_line(book, fmt)):
        if line:
            say(line)
    return 0


def _compare(args: argparse.Namespace) -> int:
    from pathlib import Path

    from symattn.input.errors import SpecError
    from symattn.input.files import read_table
    from symattn.input.floats import read_result
    from symattn.input.kernel_spec import names_layout
    from symattn.input.spec import spec_from_mapping
    from symattn.kernel import report, spread, tolerance
    from symattn.kernel.spec_comparison import WORST, compare

    if args.summary and args.format != "json":
        raise SpecError("--summary", None, "leaves the entries out of the JSON: give --format json too")
    rtol, atol = tolerance.options(args.rtol, args.atol)
    table = read_table(args.spec)
    if args.partials or args.splits is not None or names_layout(table):  # a layout's tensors: compare's arguments
        from symattn.kernel.spec_layouts import compare_spec

        options = {k: getattr(args, k) for k in ("quantity", "lse_base", "dtype", "grad_output", "naive", "splits")}
        made = compare_spec(table, args.spec, args.result, args.partials, (rtol, atol, args.max_ulp), args.all, options)
        lang = _language(args.lang) if args.lang else "en"
        _emit(made.to_json(args.summary) if args.format == "json" else made.text(lang), args.output)
        return 0 if made.ok else 1
    spec = spec_from_mapping(table, str(args.spec), Path(args.spec).parent)
    layout = "bhnd" if args.quantity.startswith("lse") else spec.kernel.layout  # an LSE is (B, H, N) in both
    results = [read_result(path, args.dtype, layout) for path in args.result]
    naive = None if args.naive is None else read_result(args.naive, args.dtype, layout)
    grad_output = None if args.grad_output is None else read_result(args.grad_output, key="dO")
    # JSON, --all and a verdict (its worst place, and what passes --max-ulp, must be decided) decide every
    # entry; a plain text report only those it can show
    full = args.format == "json" or args.all or naive is not None or rtol is not None or atol is not None
    full = full or args.max_ulp is not None or len(results) > 1
    listed = None if args.all else WORST
    reports = []
    for result in results:
        comparison = compare(spec, result, args.quantity, args.lse_base, grad_output, None if full else WORST)
        reports.append(report.judge(comparison, result, naive, rtol, atol, args.max_ulp, listed=listed))
    if len(reports) > 1:  # several runs of one kernel: their bitwise spread, and each run's own distance
        where = reports[0].comparison.where
        lined = [where.line_up(r) for r in results]
        made = report.of_runs(reports, spread.spread(lined, reports[0].comparison.format))
    else:
        made = reports[0]
    lang = _language(args.lang) if args.lang else "en"
    _emit(made.to_json(args.summary) if args.format == "json" else made.text(lang), args.output)
    return 0 if made.ok else 1


def _sweep(args: argparse.Namespace) -> int:
    from symattn.sweep.pipeline import sweep

    made = sweep(
        args.grid,
        args.kernel,
        scheduler=args.scheduler,
        output=args.output,
        resume=args.resume,
        case_seconds=args.case_seconds,
        progress=counter("cases", "case"),
    )
    _emit(made.to_json() if args.format == "json" else made.text(), None)
    return 0 if made.ok else 1


def _verify(args: argparse.Namespace) -> int:
    from pathlib import Path

    from symattn.certificates.exact_verifier import verify
    from symattn.certificates.verification import verdict
    from symattn.input import limits
    from symattn.input.files import read_table
    from symattn.verifier.reading import shortened

    data = read_table(
        args.certificate, what="a certificate", limit=limits.CERTIFICATE_BYTES, numbers=limits.CERTIFICATE_NUMBERS
    )
    result = verify(data, args.certificate, Path(args.certificate).parent)
    named = [result.certified] if result.certified else []  # as the standalone one says it
    if result.ok:
        lines = [*result.paths, *result.files, *named, f"{result.checked} values verified: {result.claim}"]
    else:  # the first 20 failures, and how many more: the verdict counts them all
        lines = [*shortened(list(result.failures)), *result.files, *named, verdict(result.failures)]
    # the report on stdout, its verdict last (as python -m symattn.verifier's): `| tail -1` is the verdict
    _emit("".join(f"{shown(f'{args.certificate}: {line}')}\n" for line in lines), None)
    return 0 if result.ok else 1


def _serve(args: argparse.Namespace) -> int:
    from symattn.web.serve import serve  # the web extra is imported only here; serve says how to install it

    return serve(args)


def _language(lang: str) -> str:
    from symattn.input.reader import Reader

    return Reader("--lang").lang(lang, "")  # the option names itself once: "--lang: expected en or zh"


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "render": _render,
    "compute": _compute,
    "check": _check,
    "exercise": _exercise,
    "grade": _grade,
    "compare": _compare,
    "sweep": _sweep,
    "verify-certificate": _verify,
    "serve": _serve,
    "example": _example,
}


def main(argv: Sequence[str] | None = None) -> int:
    with _terminate_as_interrupt():
        return _main(argv)


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM ends the command as Ctrl-C does, so that a TeX run's process group is killed on the way out."""
    import signal

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals to whoever owns them
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(argv: Sequence[str] | None) -> int:
    try:
        try:
            argv = sys.argv[1:] if argv is None else argv
            args = build_parser(command_named(argv)).parse_args(argv)
        except SystemExit as exc:  # --help, --version, or a usage error already said
            return exc.code if isinstance(exc.code, int) else EXIT_INPUT
        run = COMMANDS[args.command]
        if not hasattr(args, "max_seconds"):
            return run(args)
        from symattn.input.errors import evaluating
        from symattn.input.limits import alarm_guard, deadline

        subject = (
            getattr(args, "spec", None)
            or getattr(args, "claims", None)
            or getattr(args, "lms_csv", None)  # grading Moodle's report: the CSV, not the template, is the input
            or getattr(args, "template", None)
            or getattr(args, "folder", None)
            or getattr(args, "certificate", None)
            or args.command
        )
        # a rounding not decided names the file (evaluating); an alarm that some code turned into another
        # error (a ValueError caught, then a StopIteration) is still the time limit (alarm_guard)
        with deadline(args.max_seconds, subject), alarm_guard(), evaluating(subject):
            with steps(args.command) if args.command in ("render", "compute", "check") else nullcontext():
                return run(args)
    except SymattnError as exc:
        say(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        say("interrupted")
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
