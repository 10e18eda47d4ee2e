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
