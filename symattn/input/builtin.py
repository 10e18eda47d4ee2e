"""The built-in examples shipped inside the package, one TOML file per name and language."""

from __future__ import annotations

from pathlib import Path

from symattn.input.errors import SpecError, brief

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
DEFAULT = "seed"


def names() -> list[str]:
    """The built-in specs (claims files, named ``*-claims``, are not specs)."""
    return sorted({p.name.split(".")[0] for p in EXAMPLES.glob("*.toml")} - {n for n in _claims()})


def _claims() -> set[str]:
    return {p.name.split(".")[0] for p in EXAMPLES.glob("*-claims.*.toml")}


def example_path(name: str = DEFAULT, lang: str = "zh", flag: str = "--example") -> Path:
    """The file of one built-in example in one language (only names of built-in examples: never a path)."""
    if name not in names() and name not in _claims():
        raise SpecError(flag, None, f"no built-in example {brief(name)}; choose one of {', '.join(names())}")
    languages = sorted(p.name.split(".")[1] for p in EXAMPLES.glob(f"{name}.*.toml"))
    if lang in languages:
        return EXAMPLES / f"{name}.{lang}.toml"
    choose = ", ".join(languages)
    problem = f"the built-in example {name!r} has no language {brief(lang)}; choose one of {choose}"
    raise SpecError("--lang", None, problem)


def example_text(name: str = DEFAULT, lang: str = "zh", flag: str = "--example") -> str:
    return example_path(name, lang, flag).read_text(encoding="utf-8")
