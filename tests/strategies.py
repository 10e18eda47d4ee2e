"""Hypothesis strategies for small specs with exact decimal entries."""

from hypothesis import strategies as st


def decimal_text(max_abs: int = 3, places: int = 2):
    scale = 10**places
    return st.integers(-max_abs * scale, max_abs * scale).map(
        lambda n: f"{'-' if n < 0 else ''}{abs(n) // scale}.{abs(n) % scale:0{places}d}")


@st.composite
def specs(draw, max_tokens: int = 4, max_dim: int = 3, **extra):
    n = draw(st.integers(1, max_tokens))
    d = draw(st.integers(1, max_dim))
    dv = draw(st.integers(1, max_dim))

    def matrix(rows, cols):
        return draw(st.lists(st.lists(decimal_text(), min_size=cols, max_size=cols), min_size=rows, max_size=rows))

    return {"Q": matrix(n, d), "K": matrix(n, d), "V": matrix(n, dv), **extra}
