"""Make the README's pictures of the PDF and HTML exports.

    python docs/make_pictures.py

writes docs/seed-html.png (the Chinese seed page in headless Chromium at
1280×900), docs/seed-pdf.png (page 1 of the English seed PDF, pdftoppm at
80 dpi), docs/causal4-pdf.png (page 4 of docs/causal4.toml's PDF) and docs/sheet.png
(student s01's exercise sheet), docs/korean-pdf.png (page 4 of docs/korean.toml's PDF: Hangul labels), and
docs/causal.weights.svg and docs/causal.tokens.svg (the pictures of
the English causal example, as `render -o FILE.md` writes them; tests/test_figures.py checks they are
current). Needs TeX Live with latexmk, poppler-utils, chromium, chromium-driver
and selenium: the clients of tests/test_export.py. For a fair picture of the
Chinese page, install a CJK sans-serif font as readers have one (Debian:
fonts-wqy-microhei or fonts-noto-cjk); TeX Live's Arphic fonts alone set a Kaiti.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent


def symattn(*argv: str) -> None:
    subprocess.run([sys.executable, "-m", "symattn", *argv], check=True, cwd=DOCS.parent)


def html_picture(folder: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    page = folder / "seed.zh.html"
    symattn("render", "--lang", "zh", "--format", "html", "-o", str(page))
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--hide-scrollbars",
        "--window-size=1280,900",
        "--host-resolver-rules=MAP * ~NOTFOUND",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        # the viewport itself is 1280×900, whatever the window's frame takes
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
        )
        driver.get(page.as_uri())
        driver.execute_async_script("const done = arguments[0]; document.fonts.ready.then(() => done());")
        driver.save_screenshot(str(DOCS / "seed-html.png"))
    finally:
        driver.quit()


def pdf_picture(folder: Path) -> None:
    pdf = folder / "seed.en.pdf"
    symattn("render", "--lang", "en", "--format", "pdf", "-o", str(pdf))
    subprocess.run(
        ["pdftoppm", "-png", "-r", "80", "-f", "1", "-l", "1", "-singlefile", str(pdf), str(DOCS / "seed-pdf")],
        check=True,
    )


def causal_picture(folder: Path) -> None:
    # page 4 of the 4-token causal example: the weighted sum broken under its ≈, the matrix form
    pdf = folder / "causal4.pdf"
    symattn("render", str(DOCS / "causal4.toml"), "--format", "pdf", "-o", str(pdf))
    subprocess.run(
        ["pdftoppm", "-png", "-r", "80", "-f", "4", "-l", "4", "-singlefile", str(pdf), str(DOCS / "causal4-pdf")],
        check=True,
    )


def sheet_picture(folder: Path) -> None:
    # student s01's sheet of the README's walkthrough: symattn exercise examples/homework.toml --seed 1
    symattn(
        "exercise",
        "examples/homework.toml",
        "--count",
        "1",
        "--seed",
        "1",
        "--format",
        "pdf",
        "-o",
        str(folder / "class"),
    )
    subprocess.run(
        [
            "pdftoppm",
            "-png",
            "-r",
            "80",
            "-f",
            "1",
            "-l",
            "1",
            "-singlefile",
            str(folder / "class" / "s01" / "sheet.pdf"),
            str(DOCS / "sheet"),
        ],
        check=True,
    )


def korean_picture(folder: Path) -> None:
    # page 4 of docs/korean.toml's PDF: Hangul labels (xelatex, Noto Serif CJK) in the heatmap and the diagram
    pdf = folder / "korean.pdf"
    symattn("render", str(DOCS / "korean.toml"), "--format", "pdf", "-o", str(pdf))
    subprocess.run(
        ["pdftoppm", "-png", "-r", "80", "-f", "4", "-l", "4", "-singlefile", str(pdf), str(DOCS / "korean-pdf")],
        check=True,
    )


def figure_pictures(folder: Path) -> None:
    # the figures beside a Markdown file are SVG already: the causal example's, for the README
    symattn("render", "--example", "causal", "--lang", "en", "-o", str(folder / "causal.md"))
    for name in ("causal.weights.svg", "causal.tokens.svg"):
        shutil.copyfile(folder / name, DOCS / name)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="symattn-pictures-") as tmp:
        figure_pictures(Path(tmp))
        html_picture(Path(tmp))
        pdf_picture(Path(tmp))
        causal_picture(Path(tmp))
        sheet_picture(Path(tmp))
        korean_picture(Path(tmp))
    print("wrote", DOCS / "seed-html.png", DOCS / "seed-pdf.png", DOCS / "causal4-pdf.png", "and", DOCS / "sheet.png")
    print("and", DOCS / "korean-pdf.png")
    print("and", DOCS / "causal.weights.svg", DOCS / "causal.tokens.svg")


if __name__ == "__main__":
    main()
