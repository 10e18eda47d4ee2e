"""CI on a new machine: `.ci/run` installs every extra before it lints, type-checks or builds with it.

Every third-party module that a module mypy checks imports must come with what `.ci/run` installs: its
extras line, its other pip lines (torch) and what those require in turn. (On a machine where a session had
installed the web extra by hand, mypy passed; on a new one it stopped at starlette.) The same property
checked by a real install into a fresh venv runs with `pytest -m fresh_venv`: it repeats the install that
`.ci/run` itself makes before the suite, and took 25-31 s of the suite's time.
"""

import ast
import functools
import importlib.metadata
import re
import shlex
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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


def distribution(requirement: str) -> str:
    """A requirement's distribution name, normalized (PEP 503)."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement.strip()).group(0)).lower()


def ci_distributions() -> set[str]:
    """Every distribution `.ci/run`'s pip lines install: the project with the extras it names, the other
    packages it names, and what each of those requires with the extras asked of it (other markers aside:
    over, never under)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for line in (ROOT / ".ci" / "run").read_text().splitlines():
        if not line.startswith("python3 -m pip install "):
            continue
        argv = shlex.split(line)
        for arg in argv[4:]:
            if arg.startswith(".["):
                wanted += [r for extra in arg[2:-1].split(",") for r in project["optional-dependencies"][extra]]
            elif not arg.startswith("-"):
                wanted.append(arg)
    seen: set[str] = set()
    done: set[tuple[str, str]] = set()
    while wanted:
        requirement = wanted.pop()
        name = distribution(requirement)
        extras = re.match(r"[A-Za-z0-9._-]+\s*(?:\[([^\]]*)\])?", requirement.strip()).group(1) or ""
        for extra in ["", *(e.strip() for e in extras.split(",") if e.strip())]:
            if (name, extra) in done:
                continue
            done.add((name, extra))
            seen.add(name)
            try:
                requires = importlib.metadata.requires(name) or []
            except importlib.metadata.PackageNotFoundError:
                continue  # not installed here: its own name counts, its requirements cannot be read
            for r in requires:
                named = re.search(r"""extra\s*==\s*['"]([^'"]+)['"]""", r)
                if (named.group(1) if named else "") == extra:
                    wanted.append(r.split(";")[0])
    return seen


@functools.cache
def third_party_imports() -> dict[str, list[str]]:
    """{top-level module: [files]} for every import of a module outside the standard library and symattn,
    in every module mypy checks, at any depth; an import under ``try: … except ImportError`` is optional."""
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["packages"]
    found: dict[str, list[str]] = {}
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "vendor" in path.parts:
                continue
            tree = parsed(path)
            optional = {
                id(n)
                for node in ast.walk(tree)
                if isinstance(node, ast.Try)
                and any(h.type is not None and "ImportError" in ast.unparse(h.type) for h in node.handlers)
                for statement in node.body
                for n in ast.walk(statement)
            }
            for node in ast.walk(tree):
                if id(node) in optional:
                    continue
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for top in {name.split(".")[0] for name in names}:
                    if top not in sys.stdlib_module_names and top not in packages:
                        found.setdefault(top, []).append(str(path.relative_to(ROOT)))
    return found


def test_every_module_mypy_checks_imports_only_what_ci_installs():
    installed = ci_distributions()
    providers = importlib.metadata.packages_distributions()
    missing = {
        module: files
        for module, files in third_party_imports().items()
        if not {distribution(d) for d in providers.get(module, [module])} & installed
    }
    assert missing == {}


def test_the_import_check_sees_the_web_extra():
    """The check finds what it must: starlette and uvicorn come with the web extra, so without it they are
    missing, as they were on the new machine where mypy stopped."""
    modules = third_party_imports()
    assert {"starlette", "uvicorn", "distributed", "numpy", "sympy", "torch"} <= set(modules)
    assert "starlette" not in {
        distribution(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    }
    assert {"starlette", "uvicorn", "torch", "dask", "numpy"} <= ci_distributions()


@pytest.mark.fresh_venv
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


@functools.cache
def parsed(path: Path) -> ast.Module:
    """A file's syntax tree, parsed once for every test of this module."""
    return ast.parse(path.read_text(encoding="utf-8"))


def test_no_test_needs_torch_to_run_without_it():
    """Inside a test or its helpers too: torch comes through pytest.importorskip (or a guarded try), so that
    the README's test command, which installs no torch, skips such a test instead of failing it."""
    bare = []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        tree = parsed(path)
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
        tree = parsed(path)
        names = [
            alias.name
            for node in tree.body
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])
        ]
        if any(name == "torch" or name.startswith("torch.") for name in names):
            top_level[path.name] = names
    assert top_level == {}
