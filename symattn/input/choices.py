"""The values each setting may take: one place, cheap to import.

The spec reader validates against these, and the command line offers them as
``choices`` without loading SymPy (``symattn example`` and ``--help`` stay fast).
"""

SCALES = ("sqrt", "none")
ROUNDINGS = ("exact", "hand")
EXPANDS = ("focus", "all")
MASKS = ("none", "causal")
SOFTMAXES = ("plain", "stable")
NOTATIONS = ("auto", "fixed", "scientific")  # how shown numbers are written (see rounding)
PAPERS = ("a4", "letter")
HEADING_LEVELS = (1, 2, 3)  # the top heading: LaTeX \section, \subsection, \subsubsection; Markdown #, ##, ###
INPUTS = ("exact", "rounded")  # typed inputs exact, or standing for any value that rounds to them
FIGURES = ("all", "weights", "none")  # the heatmaps and the token diagram, the heatmaps only, or no figure


def default_paper(lang: str) -> str:
    """A4 for Chinese, US Letter for English."""
    return "a4" if lang == "zh" else "letter"


ENGINES = ("xelatex", "pdflatex", "lualatex")
CJK_FONTS = ("fandol", "adobe", "founder", "ubuntu", "windows", "mac", "macnew", "macold")  # ctex's fontsets
