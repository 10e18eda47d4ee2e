"""The house's shape, read from the sources (issue 29): imports run one way, no private name crosses a folder,
each product lives in its own wing, and no module grows past 500 lines."""

import ast
import json
from pathlib import Path

import pytest

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
    assert arrows_up("symattn.kernel", above) == []


def arrows_up(inside: str, above: tuple[str, ...]) -> list[str]:
    """The imports of the folder ``inside`` from the subpackages ``above``."""
    return [
        f"{p.relative_to(ROOT)}: {module}"
        for p in modules()
        if folder(p) == inside
        for module, _ in imports(p)
        if module.split(".")[1:2] and module.split(".")[1] in above
    ]


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


# --- issue 29: a variant is a part ------------------------------------------------------------------------

NAMES = {
    "softcap": r"soft.?cap",
    "alibi": r"alibi",
    "sinks": r"\bsinks?\b|sink_",
    "rope": r"\brope\b|rope_|rotary|_rope",
}


def test_each_variant_is_named_by_at_most_three_modules():
    # its own module(s), the registry, and at most one more: the rest reads it through symattn.variants
    import re

    offenders = {}
    for variant, pattern in NAMES.items():
        found = re.compile(pattern, re.IGNORECASE)
        naming = [str(p.relative_to(ROOT)) for p in modules() if found.search(p.read_text(encoding="utf-8"))]
        if len(naming) > 3:
            offenders[variant] = naming
    print(offenders)
    assert offenders == {}


def _model_classes() -> dict[str, Path]:
    """The package's model and boxes classes (named *Model or *Boxes, or made on Rounding: a model kind) and
    the variants' head parts, with the module each is defined in."""
    defined = {}
    for p in modules():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                if node.name.endswith(("Model", "Boxes")) or bases & {"Rounding", "HeadPart", "Model"}:
                    defined[node.name] = p
    return defined


def test_no_isinstance_on_a_model_or_boxes_class_outside_its_own_module():
    classes = _model_classes()
    assert {"Model", "Boxes", "MultiHead", "BackwardModel", "HeadGradients", "SymbolicModel"} <= set(classes)
    found = []
    for p in modules():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("isinstance", "issubclass"):
                kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
                for kind in kinds:
                    name = kind.id if isinstance(kind, ast.Name) else getattr(kind, "attr", None)
                    if name in classes and classes[name] != p:
                        found.append(f"{p.relative_to(ROOT)}:{node.lineno}: isinstance(…, {name})")
    print(found)
    assert found == []


def test_only_the_registry_imports_a_variants_module():
    # the rest of the package reads a part through symattn.variants (its names, its hooks), never its module
    shared = ("__init__", "base", "forms")  # the registry, the protocol and the forms every part builds on
    own = {f"symattn.variants.{p.stem}" for p in (PACKAGE / "variants").glob("*.py") if p.stem not in shared}
    assert {"symattn.variants.softcap", "symattn.variants.rope"} <= own
    found = [
        f"{p.relative_to(ROOT)}: {module}"
        for p in modules()
        if folder(p) != "symattn.variants"
        for module, name in imports(p)
        if module in own or f"{module}.{name}" in own
    ]
    assert found == []


def test_the_variants_import_nothing_from_the_layers_that_use_them_through_the_registry():
    # a part reaches the derivation's step helpers (in functions) and the layers below; checking, the
    # renderer, the shells and the float64 engine call it, not the other way round
    above = ("checking", "rendering", "cli", "web", "classroom", "kernel", "certificates")
    assert arrows_up("symattn.variants", above) == []


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


@pytest.mark.parametrize("packed", [False, True], ids=["version 4", "version 5, packed"])
def test_the_standalone_verifier_runs_with_only_its_folder_and_mpmath(tmp_path, monkeypatch, packed):
    """A copy of the folder beside a link to mpmath, Python started isolated and without site-packages: the
    certificate verifies, and neither symattn nor numpy, sympy or flint was imported."""
    import shutil
    import subprocess
    import sys

    import mpmath
    import numpy as np

    from symattn.certificates import tensor_maker
    from symattn.cli.commands import main

    monkeypatch.setattr(tensor_maker, "PACKED_FROM", 1 if packed else 1 << 16)

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
    assert said.stdout.splitlines()[-2].startswith(f"{cert}: 108 values verified: each exact value, computed here")
    assert said.stdout.splitlines()[-1] == "imported: [] []"
    assert json.loads(cert.read_text(encoding="utf-8"))["certificate"]["version"] == (5 if packed else 4)
