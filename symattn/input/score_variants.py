"""Read the keys that change the scores before the softmax: ALiBi's distance bias (``alibi``,
``alibi_slopes``), Gemma 2's soft-capping (``softcap``) and gpt-oss's attention sinks (``sinks``).

ALiBi (Press et al., 2022) adds −m_h·|i − j| to each scaled score of head h, with the query at
position i and the key at position j, both counted 0, 1, … from the first row. ``alibi = true``
takes the paper's slopes m_h = 2^(−8h/H), h = 1..H; ``alibi_slopes`` gives one decimal per head.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from symattn.input import limits
from symattn.input.files import kind_of
from symattn.input.messages import said
from symattn.input.numeral import Numeral
from symattn.input.reader import Reader

KEYS = ("alibi", "alibi_slopes", "softcap", "sinks")


@dataclass(frozen=True)
class Slope:
    """One head's ALiBi slope: 2^exponent (the paper's), or the decimal the spec gives."""

    exponent: Fraction = Fraction(0)  # m = 2^exponent when ``given`` is None
    given: Numeral | None = None
    head: int = 1  # which head (1-based), of how many: the paper's exponent is −8·head/heads
    heads: int = 1

    @property
    def is_paper(self) -> bool:
        return self.given is None


@dataclass(frozen=True)
class Alibi:
    """The slopes of every head (one for a single head)."""

    slopes: tuple[Slope, ...]

    @property
    def is_paper(self) -> bool:
        return self.slopes[0].is_paper

    def head(self, index: int) -> Alibi:
        return Alibi((self.slopes[index],))


def paper_slopes(heads: int) -> tuple[Slope, ...]:
    """The paper's slopes 2^(−8h/H), h = 1..H: a geometric sequence from 2^(−8/H) down to 2^(−8)."""
    return tuple(Slope(Fraction(-8 * h, heads), None, h, heads) for h in range(1, heads + 1))


def read_alibi(reader: Reader, data: Mapping[str, Any], heads: int, symbolic: bool) -> Alibi | None:
    """``alibi = true`` or ``alibi_slopes = [...]`` (one positive decimal per head), or None."""
    if "alibi" in data and "alibi_slopes" in data:
        raise reader.error("alibi_slopes", said("alibi_both"))
    if "alibi" in data:
        if not reader.flag(data["alibi"], "alibi"):
            return None
        alibi = Alibi(paper_slopes(heads))
    elif "alibi_slopes" in data:
        raw = data["alibi_slopes"]
        if not isinstance(raw, list):
            raise reader.error("alibi_slopes", said("slopes_list", heads=heads, got=kind_of(raw)))
        if len(raw) != heads:
            raise reader.error("alibi_slopes", said("slopes_count", heads=heads, n=len(raw)))
        slopes = []
        for h, x in enumerate(raw, 1):
            m = reader.number(x, "alibi_slopes", (h,))
            if not 0 < m.value <= limits.ALIBI_SLOPE:
                raise reader.error("alibi_slopes", said("slope_range", most=limits.ALIBI_SLOPE, got=m.text), (h,))
            slopes.append(Slope(given=m, head=h, heads=heads))
        alibi = Alibi(tuple(slopes))
    else:
        return None
    check_alibi(reader, alibi, symbolic, "alibi" if "alibi" in data else "alibi_slopes")
    return alibi


def read_softcap(reader: Reader, data: Mapping[str, Any], symbolic: bool) -> Numeral | None:
    """``softcap = c``: z ← c·tanh(z / c) on the (biased) scaled scores, c a decimal > 0."""
    if "softcap" not in data:
        return None
    c = reader.number(data["softcap"], "softcap")
    if not 0 < c.value <= limits.SOFTCAP:
        raise reader.error("softcap", said("softcap_range", most=limits.SOFTCAP, got=c.text))
    check_softcap(reader, c, symbolic)
    return c


def read_sinks(reader: Reader, data: Mapping[str, Any], heads: int, symbolic: bool) -> tuple[Numeral, ...] | None:
    """``sinks = [s_1, …]``: one sink logit per head, a decimal of size at most SINK_LOGIT."""
    if "sinks" not in data:
        return None
    raw = data["sinks"]
    if not isinstance(raw, list):
        raise reader.error("sinks", said("sinks_list", heads=heads, got=kind_of(raw)))
    if len(raw) != heads:
        raise reader.error("sinks", said("sinks_count", heads=heads, n=len(raw)))
    sinks = []
    for h, x in enumerate(raw, 1):
        s = reader.number(x, "sinks", (h,))
        if abs(s.value) > limits.SINK_LOGIT:
            raise reader.error("sinks", said("sink_range", most=limits.SINK_LOGIT, got=s.text), (h,))
        sinks.append(s)
    check_sinks(reader, tuple(sinks), symbolic)
    return tuple(sinks)


def check_sinks(reader: Reader, sinks: tuple[Numeral, ...] | None, symbolic: bool) -> None:
    """Refuse what sinks do not combine with."""
    if sinks is None:
        return
    if symbolic:
        raise reader.error("sinks", "symbols are not supported with sinks; give numbers")


def check_softcap(reader: Reader, softcap: Numeral | None, symbolic: bool) -> None:
    """Refuse what soft-capping does not combine with."""
    if softcap is None:
        return
    if symbolic:
        raise reader.error("softcap", "symbols are not supported with softcap; give numbers")


def check_alibi(reader: Reader, alibi: Alibi | None, symbolic: bool, key: str = "alibi") -> None:
    """Refuse what ALiBi does not combine with (from the spec's keys, or from the command line's flags)."""
    if alibi is None:
        return
    if symbolic:
        raise reader.error(key, "symbols are not supported with ALiBi; give numbers")
