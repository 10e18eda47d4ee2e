"""CI on a new machine: `.ci/run` installs every extra before it lints, type-checks or builds with it.

A venv without system site packages takes `.ci/run`'s own extras line and must then import every module
that mypy checks. (On a machine where a session had installed the web extra by hand, mypy passed; on a
new one it stopped at starlette.)
"""

import ast
import re
import shlex
import subprocess
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def extras_line() -> str:
    """The line of .ci/run that installs the project with its extras."""
    (line,) = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if re.match(r'python3 -m pip install .*"\.\[', line)
    ]
    return line


def test_ci_installs_every_extra_before_it_lints_or_tests():
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    install = next(n for n, line in enumerate(script) if line.strip() == extras_line())
    first_use = min(n for n, line in enumerate(script) if line.strip() in ("ruff check .", "mypy"))
    assert install < first_use
    extras = set(re.search(r'"\.\[([a-z,]+)\]"', extras_line()).group(1).split(","))
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    assert extras == declared


def test_a_fresh_venv_with_ci_extras_imports_every_module_mypy_checks(tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True, system_site_packages=False)
    python = env_dir / "bin" / "python"
    argv = shlex.split(extras_line())
    assert argv[:4] == ["python3", "-m", "pip", "install"]
    # --no-compile: the import below needs no bytecode written ahead, and writing it was 40% of the install's CPU time
    run = subprocess.run(
        [str(python), *argv[1:], "--no-compile"], cwd=ROOT, capture_output=True, text=True, timeout=900, check=False
    )
    assert run.returncode == 0, run.stderr[-3000:]
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["packages"]
    modules = sorted(
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for package in packages
        for path in (ROOT / package).rglob("*.py")
        if "vendor" not in path.parts
    )
    names = [m.removesuffix(".__init__") for m in modules]
    # from a folder outside the checkout, in isolated mode: only what the venv installed is found
    code = (
        "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\nprint(len(sys.argv) - 1)"
    )
    done = subprocess.run(
        [str(python), "-I", "-c", code, *names], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == str(len(names))


def test_no_test_needs_torch_to_run_without_it():
    """Inside a test or its helpers too: torch comes through pytest.importorskip (or a guarded try), so that
    the README's test command, which installs no torch, skips such a test instead of failing it."""
    bare = []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        guarded = {id(n) for node in ast.walk(tree) if isinstance(node, ast.Try) for n in ast.walk(node)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in guarded:
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if any(name == "torch" or name.startswith("torch.") for name in names):
                    bare.append(f"{path.name}:{node.lineno}")
    assert bare == []


def test_no_test_module_needs_torch_to_be_collected():
    """The README's test command installs the test extra, which holds no torch: a test that needs torch
    skips (pytest.importorskip), so no test module may import it when it is collected."""
    top_level = {}
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [
            alias.name
            for node in tree.body
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])
        ]
        if any(name == "torch" or name.startswith("torch.") for name in names):
            top_level[path.name] = names
    assert top_level == {}
