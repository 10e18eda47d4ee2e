"""What `symattn render` imports (issue 29, start-up): read from `python -X importtime`, never timed.

Rendering a spec of numbers needs SymPy, Jinja2 and the derivation; numpy (52 ms and more) only where a
spec names .npy or .safetensors files, and the kernel, certificates, checking and classroom not at all.
bench/startup.py measures what this saves as a ratio against `import sympy`.
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def imported(tmp_path: Path, *argv: str) -> list[str]:
    """The modules a new `python -X importtime -m symattn ARGV` imports, in order."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "cache"))
    said = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "symattn", *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return [line.rpartition("|")[2].strip() for line in said.stderr.splitlines() if line.startswith("import time:")]


def test_render_of_the_builtin_example_imports_no_numpy(tmp_path):
    modules = imported(tmp_path, "render", "-o", str(tmp_path / "seed.md"))
    assert "symattn.derivation.derive" in modules and "jinja2" in modules  # the command did run
    assert [m for m in modules if m == "numpy" or m.startswith("numpy.")] == []
    wings = ("symattn.kernel", "symattn.certificates", "symattn.checking", "symattn.classroom", "symattn.web")
    assert [m for m in modules if m.startswith(wings)] == []
    assert (tmp_path / "seed.md").read_text(encoding="utf-8").startswith("# ")


def test_a_spec_of_files_still_reads_them_with_numpy(tmp_path):
    import numpy as np

    for name in ("q", "k", "v"):
        np.save(tmp_path / f"{name}.npy", np.array([[1.0, 0.5], [0.25, 2.0]]))
    (tmp_path / "spec.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n', encoding="utf-8")
    modules = imported(tmp_path, "render", str(tmp_path / "spec.toml"), "-o", str(tmp_path / "out.md"))
    assert "numpy" in modules
    assert "0.25" in (tmp_path / "out.md").read_text(encoding="utf-8")


def test_the_parser_of_one_command_is_that_command_of_the_whole_parser():
    # a command line builds only the options of the command it names (symattn.cli.parser._Commands)
    from symattn.cli.parser import build_parser, command_named

    def commands(parser) -> dict:
        return next(a for a in parser._actions if a.dest == "command").choices

    whole = build_parser()
    assert whole.format_help() == build_parser("render").format_help()  # `symattn --help` lists them all
    for name, full in commands(whole).items():
        alone = commands(build_parser(name))
        assert list(alone) == list(commands(whole))
        assert alone[name].format_help() == full.format_help()
        assert [a.dest for a in alone[name]._actions] == [a.dest for a in full._actions]
    assert [a.dest for a in commands(build_parser("render"))["compute"]._actions] == ["help"]
    assert command_named(["--version"]) is None
    assert command_named(["render", "--format", "latex"]) == "render"
    assert command_named(["-h", "check", "x.toml"]) == "check"


def test_the_program_is_main_then_an_exit_without_the_last_collection(tmp_path):
    # symattn.cli.run, the console script's and `python -m symattn`'s: main's exit status and output, with
    # gc.freeze() so that no collection walks SymPy's objects; main() itself never freezes
    script = (
        "import gc, sys\nfrom symattn.cli import main, run\n"
        "code = main(['example', '--name', 'seed', '--lang', 'en'])\nprint(code, gc.get_freeze_count() == 0)\n"
        "sys.argv = ['symattn', 'example', '--name', 'nothing']\ncode = run()\n"
        "print(code, gc.get_freeze_count() > 0, 'sympy' in sys.modules)\n"
        "sys.argv = ['symattn', 'render', '--bogus']\ncode = run()\nprint(code, 'sympy' in sys.modules)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "cache"))
    said = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    lines = said.stdout.splitlines()
    assert lines[-3:] == ["0 True", "2 True False", "2 True"]  # render's SymPy is imported (and frozen) first
    assert said.stderr.splitlines()[-1] == "symattn: unrecognized arguments: --bogus"
    made = subprocess.run(
        [sys.executable, "-m", "symattn", "example", "--name", "seed", "--lang", "en"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert made.stdout == "\n".join(lines[:-3]) + "\n"  # the same spec, through run()
