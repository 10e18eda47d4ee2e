"""Benchmark: a class of 40 students with PDF sheets and keys, per student, against one PDF compile.

    python bench/exercise.py            # 40 students, PDF (needs latexmk + TeX Live)
    python bench/exercise.py --count 10

The baseline, measured in the same run, is one standalone derivation compiled to a PDF
(the seed example): a student's PDF sheet and key are two such compiles plus the draw.
Quote the ratio; absolute times on shared machines are noise.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from symattn.classroom import exercises as ex  # noqa: E402
from symattn.derivation.derive import derive  # noqa: E402
from symattn.input import builtin  # noqa: E402
from symattn.input.spec import load_spec  # noqa: E402
from symattn.rendering.pdf import latex_to_pdf  # noqa: E402
from symattn.rendering.renderer import render  # noqa: E402

HOMEWORK = ROOT / "examples" / "homework.toml"


def seconds(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=40)
    args = parser.parse_args()
    ids = [f"s{i:02d}" for i in range(1, args.count + 1)]
    template = HOMEWORK.read_bytes()

    seed = load_spec(builtin.example_path("seed", "en"))
    latex_to_pdf(render(derive(seed), "latex", standalone=True))  # warm the TeX font caches
    one_pdf, _ = seconds(lambda: latex_to_pdf(render(derive(seed), "latex", standalone=True)))

    draw_s, variants = seconds(ex.exercise, HOMEWORK, ids, 1)
    markdown_s, files = seconds(ex.class_files, variants, template, "markdown")
    pdf_s, _ = seconds(ex.class_files, variants, template, "pdf")
    n = len(ids)
    print(f"baseline: one standalone PDF (seed, pdflatex) {one_pdf:.2f} s")
    print(f"draw {n} variants: {draw_s:.2f} s ({draw_s / n * 1000:.0f} ms per student)")
    print(f"markdown class ({len(files)} files): {markdown_s:.2f} s ({markdown_s / n * 1000:.0f} ms per student)")
    print(
        f"PDF class, sheets + keys + key-all: {pdf_s:.1f} s, {pdf_s / n:.2f} s per student "
        f"= {pdf_s / n / one_pdf:.2f}x one PDF compile"
    )


if __name__ == "__main__":
    main()
