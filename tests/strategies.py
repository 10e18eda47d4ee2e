"""Hypothesis strategies for small specs with exact decimal entries."""

from hypothesis import strategies as st


def decimal_text(max_abs: int = 3, places: int = 2):
    scale = 10**places
    return st.integers(-max_abs * scale, max_abs * scale).map(
        lambda n: f"{'-' if n < 0 else ''}{abs(n) // scale}.{abs(n) % scale:0{places}d}"
    )


@st.composite
def specs(draw, max_tokens: int = 4, max_dim: int = 3, **extra):
    n = draw(st.integers(1, max_tokens))
    d = draw(st.integers(1, max_dim))
    dv = draw(st.integers(1, max_dim))

    def matrix(rows, cols):
        return draw(st.lists(st.lists(decimal_text(), min_size=cols, max_size=cols), min_size=rows, max_size=rows))

    return {"Q": matrix(n, d), "K": matrix(n, d), "V": matrix(n, dv), **extra}


def matrix(draw, rows: int, cols: int) -> list[list[str]]:
    return draw(st.lists(st.lists(decimal_text(), min_size=cols, max_size=cols), min_size=rows, max_size=rows))


def multihead_base(draw) -> tuple[dict, int, int, int]:
    """X with W_Q, W_K, W_V, W_O and every bias, 1 or 2 heads, sometimes cross-attention (X_kv).

    Returns the spec keys, E (d_model), n_q and n_k: each test adds its own (padding, [backward]).
    """
    heads = draw(st.integers(1, 2))
    E = heads * draw(st.integers(1, 2))
    n_q, n_k = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    raw = {
        "X": matrix(draw, n_q, E),
        "heads": heads,
        **{w: matrix(draw, E, E) for w in ("W_Q", "W_K", "W_V", "W_O")},
        **{b: draw(st.lists(decimal_text(), min_size=E, max_size=E)) for b in ("b_Q", "b_K", "b_V", "b_O")},
    }
    if n_q != n_k or draw(st.booleans()):
        raw["X_kv"] = matrix(draw, n_k, E)
    return raw, E, n_q, n_k
