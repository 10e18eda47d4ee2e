"""The house's shape, read from the sources (issue 29): imports run one way, no private name crosses a folder,
each product lives in its own wing, and no module grows past 500 lines."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "symattn"


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "vendor" not in p.relative_to(PACKAGE).parts)


def imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every `from symattn… import name` in a file, inside functions too."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("symattn"):
            out += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            out += [(alias.name, "") for alias in node.names if alias.name.startswith("symattn")]
    return out


def folder(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).parent.parts)


def test_derivation_and_the_layers_below_it_import_nothing_from_checking():
    below = ("derivation", "exact", "kernel", "input", "rendering", "certificates")
    found = [
        f"{p.relative_to(ROOT)}: {module}"
        for p in modules()
        if folder(p).removeprefix("symattn.") in below
        for module, _ in imports(p)
        if module == "symattn.checking" or module.startswith("symattn.checking.")
    ]
    assert found == []


def test_the_float64_engine_imports_nothing_from_above_it():
    above = ("checking", "classroom", "cli", "web", "derivation")  # its reports use the renderer's templates
    found = [
        f"{p.relative_to(ROOT)}: {module}"
        for p in modules()
        if folder(p) == "symattn.kernel"
        for module, _ in imports(p)
        if module.split(".")[1:2] and module.split(".")[1] in above
    ]
    assert found == []


def test_no_private_name_is_imported_across_folders():
    found = []
    for p in modules():
        for module, name in imports(p):
            home = module if (ROOT / Path(*module.split("."))).is_dir() else module.rpartition(".")[0]
            if name.startswith("_") and not name.startswith("__") and home != folder(p):
                found.append(f"{p.relative_to(ROOT)}: {module}.{name}")
    assert found == []


def test_certificates_live_in_one_folder():
    makers_and_verifiers = sorted(
        str(p.relative_to(PACKAGE))
        for p in modules()
        if "certif" in p.stem or "verif" in p.stem or (p.parent.name == "certificates" and p.stem != "__init__")
    )
    assert {Path(m).parts[0] for m in makers_and_verifiers} == {"certificates"}


def test_no_module_is_over_500_lines():
    long = {
        str(p.relative_to(ROOT)): n for p in modules() if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500
    }
    assert long == {}


VERIFIER = PACKAGE / "verifier"


def test_the_standalone_verifier_imports_only_the_standard_library_and_mpmath():
    import sys

    found = []
    for p in sorted(VERIFIER.glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [] if node.level else [node.module or ""]  # relative: its own folder
            else:
                continue
            top = {n.split(".")[0] for n in names}
            found += [f"{p.name}: {t}" for t in sorted(top - set(sys.stdlib_module_names) - {"mpmath"})]
    assert found == []


def test_the_standalone_verifier_runs_with_only_its_folder_and_mpmath(tmp_path):
    """A copy of the folder beside a link to mpmath, Python started isolated and without site-packages: the
    certificate verifies, and neither symattn nor numpy, sympy or flint was imported."""
    import shutil
    import subprocess
    import sys

    import mpmath
    import numpy as np

    from symattn.cli.commands import main

    lib = tmp_path / "lib"
    shutil.copytree(VERIFIER, lib / "verifier", ignore=shutil.ignore_patterns("__pycache__"))
    (lib / "mpmath").symlink_to(Path(mpmath.__file__).parent)
    rng = np.random.default_rng(2)
    for name in ("q", "k", "v", "do"):
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((6, 4)).astype(np.float16))
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n', encoding="utf-8")
    cert = tmp_path / "c.json"
    assert main(["compute", str(tmp_path / "s.toml"), "--certify", "--float64", "--grad-output",
                 str(tmp_path / "do.npy"), "-o", str(cert)]) == 0  # fmt: skip
    program = (
        "import runpy, sys\n"
        f"sys.path.insert(0, {str(lib)!r})\n"
        f"sys.argv = ['verifier', {str(cert)!r}]\n"
        "try:\n    runpy.run_module('verifier', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as exc:\n    code = exc.code\n"
        "outside = sorted({m.split('.')[0] for m in sys.modules} & {'symattn', 'numpy', 'sympy', 'flint', 'gmpy2'})\n"
        "print('imported:', outside, [p for p in sys.path if 'site-packages' in p])\n"
        "sys.exit(code)\n"
    )
    said = subprocess.run([sys.executable, "-I", "-S", "-c", program], capture_output=True, text=True, cwd=tmp_path)
    assert (said.returncode, said.stderr) == (0, "")
    assert said.stdout.splitlines()[0].startswith(f"{cert}: 108 values verified: each exact value, computed here")
    assert said.stdout.splitlines()[-1] == "imported: [] []"
