"""The installed wheel, outside the checkout, must carry and find its data."""

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    pytest.importorskip("hatchling", reason="hatchling (a test extra) builds the wheel")
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (path,) = out.glob("symattn-*.whl")
    return path


def test_wheel_ships_templates_languages_and_examples(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "symattn/templates/document.markdown.j2",
        "symattn/templates/math.j2",
        "symattn/templates/lang/zh.toml",
        "symattn/templates/lang/en.toml",
        "symattn/examples/seed.zh.toml",
        "symattn/examples/seed.en.toml",
        "symattn/templates/app.html.j2",
        "symattn/web/app.js",
        "symattn/web/live.js",
        "symattn/web/practice.js",
        "symattn/templates/step.latex.j2",
        "symattn/templates/hint.markdown.j2",
        "symattn/web/app.css",
        "symattn/templates/gradebook.latex.j2",
        "symattn/templates/keys.markdown.j2",
        "symattn/templates/beamer.latex.j2",
        "symattn/templates/slides.html.j2",
        "symattn/vendor/revealjs/reveal.js",
        "symattn/vendor/revealjs/LICENSE",
    ):
        assert required in names
    assert not any(name.startswith("templates/") for name in names)


def test_installed_wheel_renders_from_any_folder(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    # system site-packages provide sympy and jinja2 without a download; the wheel's
    # own symattn comes first on the path
    venv.EnvBuilder(with_pip=True, system_site_packages=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run(
        [str(python), "-c", "import symattn, sys; print(symattn.__file__)"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert where.startswith(str(env_dir))
    script = env_dir / "bin" / "symattn"
    for args, golden in ((["render"], "seed.zh.md"), (["render", "--lang", "en"], "seed.en.md")):
        out = subprocess.run([str(script), *args], cwd=elsewhere, capture_output=True, text=True, check=True)
        assert out.stdout == (GOLDEN / golden).read_text(encoding="utf-8")
    out = subprocess.run(
        [str(python), "-m", "symattn", "example", "--lang", "en"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.startswith("# Built-in example")
