"""Math in titles: a whitelist grammar of TeX, parsed and re-emitted from the tree.

A title's ``$…$`` span reaches pdflatex, xelatex, lualatex and KaTeX. A
blacklist of commands always misses one (TeX reads ``^^5c`` as a backslash),
so only this grammar is accepted, and what reaches a client is emitted from
the parse tree, never copied from the input::

    math    := item*
    item    := atom ("'")* (("^" | "_") atom)*     at most one ^ and one _ per atom
    atom    := char | "{" math "}" | command
    command := "\\" NAME argument*                 NAME from COMMANDS, its arguments as COMMANDS says
    char    := a letter, a digit, a space, or one of  + - = < > ( ) [ ] , . ; : ! ? / | *

Anything else, ``^^`` included, is a :class:`TitleMathError` naming the
character or the command.
"""

from __future__ import annotations

from symattn.input.messages import said
from symattn.input.records import record

_GREEK = (
    "alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi pi "
    "varpi rho varrho sigma varsigma tau upsilon phi varphi chi psi omega "
    "Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega"
).split()
_SYMBOLS = (
    "cdot times div pm mp le leq ge geq ne neq approx sim simeq equiv propto in notin subset subseteq "
    "cup cap to rightarrow leftarrow Rightarrow mapsto infty partial nabla sum prod top "
    "ldots cdots dots prime star circ odot otimes oplus ell forall exists mid langle rangle lfloor "
    "rfloor lceil rceil vert Vert log ln exp max min sin cos tan tanh quad qquad"
).split()

# name -> how it reads its arguments: "m" a math argument, "t" a text argument, "o" an optional [math]
COMMANDS: dict[str, str] = {
    **{name: "" for name in _GREEK + _SYMBOLS},
    **{
        name: "m"
        for name in (
            "mathrm",
            "mathbf",
            "mathit",
            "mathsf",
            "mathtt",
            "mathcal",
            "operatorname",
            "hat",
            "bar",
            "tilde",
            "vec",
            "dot",
            "overline",
            "underline",
            "widehat",
        )
    },
    "sqrt": "om",
    "frac": "mm",
    "tfrac": "mm",
    "dfrac": "mm",
    "text": "t",
}
_CONTROL_SYMBOLS = frozenset(",;:! {}|%")  # \, \; \: \! \␣ spacing; \{ \} \| \% printed characters
_CHARS = frozenset("+-=<>()[],.;:!?/|* '")
_TEXT_CHARS = frozenset("+-=<>()[],.;:!?/|*' \"@&#%~^_$")  # inside \text{}: re-escaped on the way out


class TitleMathError(ValueError):
    """The math of a title is outside the grammar. Callers add the file and key."""


@record
class Char:
    text: str


@record
class Group:
    items: tuple


@record
class Command:
    name: str  # a control word (letters) or a control symbol (one character)
    arguments: tuple = ()  # (kind, Group | Text), kind from COMMANDS


@record
class Text:
    text: str  # the argument of \text, kept as characters; escaped when emitted


@record
class Scripted:
    base: object
    primes: int
    scripts: tuple  # (("^" | "_"), atom) in the order typed, at most one of each


class _Parser:
    def __init__(self, source: str):
        self.source = source
        self.pos = 0

    def error(self, message: str) -> TitleMathError:
        return TitleMathError(said("math_in", problem=message, source=self.source))

    def peek(self) -> str:
        return self.source[self.pos] if self.pos < len(self.source) else ""

    def parse(self) -> Group:
        return self.math(closing=False)

    def math(self, closing: bool) -> Group:
        items: list[object] = []
        while True:
            ch = self.peek()
            if ch == "":
                if closing:
                    raise self.error(said("math_braces"))
                return Group(tuple(items))
            if ch == "}":
                if not closing:
                    raise self.error(said("math_braces"))
                self.pos += 1
                return Group(tuple(items))
            items.append(self.item())

    def item(self):
        if self.peek() in "^_":
            base = Group(())  # TeX allows a script with nothing before it
        else:
            base = self.atom()
            if isinstance(base, Char) and base.text == " ":
                return base
        primes = 0
        while self.peek() == "'":
            primes += 1
            self.pos += 1
        scripts: list[tuple[str, object]] = []
        after = self.pos
        self.skip_spaces()
        if self.peek() not in ("^", "_") or not self.peek():
            self.pos = after  # spaces between items are kept; before a script TeX ignores them
        while self.peek() in ("^", "_") and self.peek():
            op = self.peek()
            self.pos += 1
            if self.peek() in ("^", "_"):
                raise self.error(said("math_carets") if self.peek() == op == "^" else said("math_script", op=op))
            self.skip_spaces()
            if self.peek() in ("", "}"):
                raise self.error(said("math_script", op=op))
            script = self.atom()
            if any(op == seen for seen, _ in scripts):
                raise self.error(said("math_two_sup" if op == "^" else "math_two_sub"))
            scripts.append((op, script))
        if not primes and not scripts:
            return base
        return Scripted(base, primes, tuple(scripts))

    def skip_spaces(self) -> None:
        while self.peek() == " ":
            self.pos += 1

    def atom(self):
        ch = self.peek()
        if ch == "{":
            self.pos += 1
            return self.math(closing=True)
        if ch == "\\":
            return self.command()
        if ch.isascii() and (ch.isalnum() or ch in _CHARS):
            self.pos += 1
            return Char(ch)
        if ch in "^_":
            raise self.error(said("math_script", op=ch))
        raise self.error(said("math_character", ch=_shown(ch)))

    def command(self):
        start = self.pos
        self.pos += 1
        while self.peek().isascii() and self.peek().isalpha():
            self.pos += 1
        name = self.source[start + 1 : self.pos]
        if not name:
            ch = self.peek()
            if ch not in _CONTROL_SYMBOLS:
                raise self.error(said("math_command", name=ch) if ch else said("math_backslash"))
            self.pos += 1
            return Command(ch)
        if name not in COMMANDS:
            raise TitleMathError(said("math_not_allowed", name=name))
        arguments = []
        for kind in COMMANDS[name]:
            self.skip_spaces()
            if kind == "o":
                if self.peek() == "[":
                    arguments.append(("o", self.optional(name)))
                continue
            if self.peek() in ("", "}"):
                raise self.error(said("math_arguments", name=name, n=len(COMMANDS[name].replace("o", ""))))
            arguments.append((kind, self.text(name) if kind == "t" else self.argument()))
        return Command(name, tuple(arguments))

    def argument(self) -> Group:
        atom = self.atom()
        return atom if isinstance(atom, Group) else Group((atom,))

    def optional(self, name: str) -> Group:
        self.pos += 1
        items = []
        while self.peek() != "]":
            if self.peek() in ("", "}"):
                raise self.error(said("math_bracket", name=name))
            items.append(self.item())
        self.pos += 1
        return Group(tuple(items))

    def text(self, name: str) -> Text:
        if self.peek() != "{":
            raise self.error(said("math_text_braces", name=name))
        end = self.source.find("}", self.pos)
        if end < 0:
            raise self.error(said("math_braces"))
        text = self.source[self.pos + 1 : end]
        for ch in text:
            if not (ch.isascii() and (ch.isalnum() or ch in _TEXT_CHARS)):
                raise self.error(said("math_text_character", ch=_shown(ch), name=name))
        self.pos = end + 1
        return Text(text)


def _shown(ch: str) -> str:
    return f"U+{ord(ch):04X}" if not ch.isprintable() or ch.isspace() and ch != " " else f"'{ch}'"


def parse(source: str) -> Group:
    """The parse tree of one ``$…$`` span (without the dollars). Raises TitleMathError."""
    if not source.strip():
        raise TitleMathError(said("math_empty"))
    return _Parser(source).parse()


def emit(node, escape_text) -> str:
    """TeX for the tree, for LaTeX and KaTeX alike; ``escape_text`` escapes the text of ``\\text{}``."""
    pieces: list[str] = []
    _emit(node, escape_text, pieces)
    out = ""
    for piece in pieces:
        # a control word swallows the letters after it: keep them apart
        if out and piece[:1].isalpha() and _ends_in_control_word(out):
            out += " "
        out += piece
    return out


def _ends_in_control_word(text: str) -> bool:
    i = len(text)
    while i and text[i - 1].isascii() and text[i - 1].isalpha():
        i -= 1
    return i < len(text) and i > 0 and text[i - 1] == "\\"  # the grammar has no \\, so this \ starts a command


def _emit(node, escape_text, out: list[str]) -> None:
    if isinstance(node, Char):
        out.append(node.text)
    elif isinstance(node, Group):
        for item in node.items:
            _emit(item, escape_text, out)
    elif isinstance(node, Command):
        out.append("\\" + node.name)
        for kind, argument in node.arguments:
            if kind == "t":
                out.append("{" + escape_text(argument.text) + "}")
            else:
                out.append("[" if kind == "o" else "{")
                _emit(argument, escape_text, out)
                out.append("]" if kind == "o" else "}")
    elif isinstance(node, Scripted):
        _emit_braced_if_group(node.base, escape_text, out)
        out.append("'" * node.primes)
        for op, script in node.scripts:
            out.append(op)
            _emit_script(script, escape_text, out)
    else:  # pragma: no cover - the parser makes no other node
        raise TypeError(f"not a title-math node: {node!r}")


def _emit_braced_if_group(node, escape_text, out: list[str]) -> None:
    if isinstance(node, Group):
        out.append("{")
        _emit(node, escape_text, out)
        out.append("}")
    else:
        _emit(node, escape_text, out)


def _emit_script(node, escape_text, out: list[str]) -> None:
    if isinstance(node, Char):
        out.append(node.text)
        return
    out.append("{")
    _emit(node, escape_text, out)
    out.append("}")


# the commands whose plain text is one character; the others are written as their name
_PLAIN = {
    **dict(zip(_GREEK, "αβγδεεζηθθικλμνξπϖρϱσςτυφφχψωΓΔΘΛΞΠΣΥΦΨΩ", strict=True)),
    **{"cdot": "·", "times": "×", "div": "÷", "pm": "±", "mp": "∓", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥"},
    **{"ne": "≠", "neq": "≠", "approx": "≈", "sim": "∼", "to": "→", "rightarrow": "→", "leftarrow": "←"},
    **{"Rightarrow": "⇒", "mapsto": "↦", "infty": "∞", "partial": "∂", "nabla": "∇", "sum": "∑", "prod": "∏"},
    **{"top": "ᵀ", "ldots": "…", "cdots": "⋯", "dots": "…", "prime": "′", "in": "∈", "quad": " ", "qquad": " "},
    **{",": " ", ";": " ", ":": " ", " ": " ", "!": "", "{": "{", "}": "}", "|": "‖", "%": "%"},
}


def plain_title(title: str) -> str:
    """A title as plain text (a menu, a terminal): its ``$…$`` math written out from the parse tree."""
    from symattn.input.text import split_math

    return "".join(plain(parse(piece)) if is_math else piece for is_math, piece in split_math(title))


def plain(node) -> str:
    """The tree as plain text, for where TeX is not typeset (a menu): Greek and symbols as Unicode, a
    fraction as a/b, a root as √, scripts as ``_`` and ``^``."""
    if isinstance(node, Char):
        return node.text
    if isinstance(node, Group):
        return "".join(plain(item) for item in node.items)
    if isinstance(node, Text):
        return node.text
    if isinstance(node, Command):
        parts = [plain(argument) for _, argument in node.arguments]
        if node.name in ("frac", "tfrac", "dfrac"):
            return f"({parts[0]})/({parts[1]})"
        if node.name == "sqrt":
            return "√(" + parts[-1] + ")"
        if parts:
            return "".join(parts)
        return _PLAIN.get(node.name, node.name)
    if isinstance(node, Scripted):
        out = plain(node.base) + "′" * node.primes
        for op, script in node.scripts:
            text = plain(script)
            # c_KV as the examples' comments write it; braces where the script is more than a name (x_{i+1})
            out += text if (op, text) == ("^", "ᵀ") else op + (text if text.isalnum() else "{" + text + "}")
        return out
    raise TypeError(f"not a title-math node: {node!r}")  # pragma: no cover - the parser makes no other node


def check(source: str) -> str | None:
    """Why ``source`` is outside the grammar, or None."""
    try:
        parse(source)
    except TitleMathError as exc:
        return str(exc)
    return None
