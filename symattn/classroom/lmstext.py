"""The HTML an LMS question shows: the student's numbers, the task and the asked numbers' labels.

Moodle and Canvas show math through MathJax, written ``\\( \\)``; only symattn's own math goes there.
User text (title, tokens) is escaped by one character map (:func:`text`) that also writes ``{``, ``}`` and
``\\`` as character references, so that it can neither open a Cloze gap nor start math, and sits in a span
that Moodle's filters (``nolink``) and MathJax (``tex2jax_ignore``, ``mathjax_ignore``) leave alone.
"""

from __future__ import annotations

from collections.abc import Callable

import symattn.classroom.mla_sheet as mla_sheet
from symattn import variants as parts
from symattn.classroom.variants import Asked, Variant, worked_rows

_TEXT = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        '"': "&quot;",
        "'": "&#39;",
        "{": "&#123;",
        "}": "&#125;",
        "\\": "&#92;",
        "$": "&#36;",
    }
)
IGNORED = "nolink tex2jax_ignore mathjax_ignore"  # no Moodle filter and no MathJax looks inside


def text(s: str) -> str:
    """Plain text as HTML that no LMS reads as markup, math or a Cloze gap."""
    return s.translate(_TEXT)


def user(s: str) -> str:
    """User text (a token, a title) in a span that filters and MathJax skip."""
    return f'<span class="{IGNORED}">{text(s)}</span>'


def math(tex: str) -> str:
    """symattn's own TeX (numbers, d_k) as MathJax math; only & < > need escaping in HTML."""
    return "\\(" + tex.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") + "\\)"


def phrases(lang: str):
    """The language's phrases, their text escaped as HTML by :func:`text`."""
    from symattn.rendering.phrases import Phrases, load_language

    return Phrases(load_language(lang), text, lang)


def plain_phrases(lang: str):
    """The language's phrases as plain text, for XML attributes (ElementTree escapes them)."""
    from symattn.rendering.phrases import Phrases, load_language

    return Phrases(load_language(lang), lambda s: s, lang)


def title(v: Variant, t) -> str:
    """The question's name: the template's title and the variant's id, escaped as ``t`` escapes."""
    return t(
        "lms.name",
        title=t.escape(v.spec.document.title) if v.spec.document.title else t("sheet.untitled"),
        id=t.escape(v.id),
    )


def intro(v: Variant, t) -> str:
    """The student's numbers and the task, as HTML paragraphs and tables."""
    from symattn.rendering.numbers import tex_number

    spec = v.spec
    tokens = spec.tokens
    listed = t.escape(t.raw("list_sep")).join(t("quote", x=user(x)) for x in tokens)
    parts = [f"<p>{t('sheet.tokens', tokens=listed)}</p>"]
    if spec.scale == "sqrt":
        dims = t("sheet.dims_sqrt", dk=math(f"d_k = {spec.d_k}"), scale=math("\\sqrt{d_k}"))
    elif spec.scale == "none":
        dims = t("sheet.dims_none", dk=math(f"d_k = {spec.d_k}"))
    else:
        dims = t("sheet.dims_number", dk=math(f"d_k = {spec.d_k}"), scale=math(tex_number(spec.scale)))
    parts.append(f"<p>{dims}</p>")
    table = mla_sheet.stated(spec)
    if table:
        parts.append(f"<p>{_mla_words(spec, t)}</p>")
    parts.append(f"<p>{t('sheet.inputs')}</p>")
    columns = [("X", table[0][1])] if table else [("Q", spec.Q), ("K", spec.K), ("V", spec.V)]
    header = "".join(f"<th>{math(name)}</th>" for name, _ in columns)
    rows = []
    for i, token in enumerate(tokens):
        cells = "".join("<td>" + math(",\\ ".join(tex_number(x) for x in m[i])) + "</td>" for _, m in columns)
        rows.append(f"<tr><td>{user(token)}</td>{cells}</tr>")
    parts.append(f'<table border="1"><tr><th>{t("setup.token")}</th>{header}</tr>{"".join(rows)}</table>')
    parts += [f"<p>{math(_matrix(name, m))}</p>" for name, m in table[1:]]
    focus = t("quote", x=user(tokens[spec.focus]))
    task = t("sheet.task_all") if len(worked_rows(v.asked)) > 1 else t("sheet.task_focus", token=focus)
    parts.append(f"<p>{t('lms.task')}</p><p>{task}</p>")
    return "".join(parts)


# the [mla] table's matrices as the sheet writes them (templates/sheet_mla.j2)
_TEX = {"W_DKV": "W_{DKV}", "W_UK": "W_{UK}", "W_UV": "W_{UV}", "W_Q": "W_Q", "W_DQ": "W_{DQ}", "W_UQ": "W_{UQ}"}
_TEX.update(W_QR="W_{QR}", W_KR="W_{KR}")
_TEX.update(zip(parts.turner().turn_quantities, ("\\cos\\theta", "\\sin\\theta"), strict=True))


def _matrix(name: str, m) -> str:
    from symattn.rendering.numbers import tex_number

    rows = " \\\\ ".join(" & ".join(tex_number(x) for x in row) for row in m)
    return f"{_TEX[name]} = \\begin{{bmatrix}}{rows}\\end{{bmatrix}}"


def _mla_words(spec, t) -> str:
    """What the [mla] table makes and the route to take, as the sheet says it."""
    setting = spec.setting("mla")
    query = "Q = X W_Q" if len(setting.query) == 1 else "Q = (X W_{DQ})\\, W_{UQ}"
    made = t(
        "sheet.mla",
        c=math("c_{KV} = X W_{DKV}"),
        K=math("K = c_{KV} W_{UK}"),
        V=math("V = c_{KV} W_{UV}"),
        Q=math(query),
    )
    words = [made, t("sheet.mla_naive") if setting.route != "absorbed" else _absorbed(t)]
    pairs = mla_sheet.pairs(spec)
    if pairs:
        words.append(
            t(
                "sheet.mla_decoupled",
                dr=2 * len(pairs),
                qR=math("q_R = x\\, W_{QR}"),
                kR=math("k_R = x\\, W_{KR}"),
                q=math("[\\,q_{nope}\\;\\; q_R\\,]"),
                k=math("[\\,k_{nope}\\;\\; k_R\\,]"),
                pairs=t.escape(t.raw("list_sep")).join(math(f"({a},\\ {b})") for a, b in pairs),
                C=math("\\cos\\theta"),
                S=math("\\sin\\theta"),
            )
        )
        if setting.route == "absorbed":
            score = math("\\tilde{q}\\, c_j^{\\top} + q'_R\\, {k'_R}^{\\top}")
            words.append(t("sheet.mla_decoupled_absorbed", s=score))
    return " ".join(words)


def _absorbed(t) -> str:
    return t(
        "sheet.mla_absorbed",
        WUK=math("W_{UK}"),
        qt=math("\\tilde{q} = q\\, W_{UK}^{\\top}"),
        s=math("\\tilde{q}\\, c_{KV}^{\\top}"),
        u=math("u = P\\, c_{KV}"),
        WUV=math("W_{UV}"),
        o=math("o = u\\, W_{UV}"),
    )


def numbered(quantity: str) -> bool:
    """Whether a quantity's columns are numbered (V's and the latent's), not named by a key's token."""
    return quantity == "output" or quantity in mla_sheet.QUANTITIES


# the formulas in a quantity's name, typeset as the question's other formulas are (as the report's place.j2 does)
_NAMED = {"latent": ("c_KV", "c_{KV}"), "latent_output": ("u = P c_KV", "u = P\\, c_{KV}")}


def quantity_name(t, quantity: str) -> str:
    """A quantity's name as the question writes it: "MLA latent output \\(u = P\\, c_{KV}\\)"."""
    name = t(f"quantity.{quantity}")
    plain, tex = _NAMED.get(quantity, ("", ""))
    if not plain or plain not in name:
        return name
    before, _, after = name.rpartition(plain)
    return before + math(tex) + after


def label_cells(a: Asked, v: Variant, t) -> list[str]:
    """The quantity, row and column of an asked number, as the sheet's table names them."""
    tokens = v.spec.tokens
    row = "" if a.row is None else user(tokens[a.row])
    if a.col is None:
        col = ""
    elif numbered(a.quantity):
        col = t("sheet.column", n=a.col + 1)
    else:
        col = user(tokens[a.col])
    return [quantity_name(t, a.quantity), row, col]


def decimals_note(t: Callable, quantity_name: str, n: int) -> str:
    """ "weight A: 3 decimal places", in the language's singular or plural."""
    forms = t.raw("sheet.decimals")  # type: ignore[attr-defined]
    return t.fill(forms[0 if n == 1 else 1], quantity=quantity_name, n=n)  # type: ignore[attr-defined]


__all__ = [
    "IGNORED",
    "decimals_note",
    "intro",
    "label_cells",
    "math",
    "numbered",
    "phrases",
    "plain_phrases",
    "quantity_name",
    "text",
    "title",
    "user",
]
