"""The steps of grouped heads (issue 20): which key/value head each query head uses, and, backward, how a
shared K and V add up their group's gradients. Plain data only."""

from __future__ import annotations

from typing import ClassVar

from symattn.exact.rounding import NumRows
from symattn.input.groups import group_of
from symattn.input.records import record
from symattn.input.spec import Spec


@record
class KVGroup:
    index: int  # the key/value head, 0-based
    first: int  # its first column of K (0-based)
    width: int  # d_k
    first_v: int  # its first column of V
    width_v: int  # d_v
    heads: tuple[int, ...]  # the query heads (0-based) that use it


@record
class Groups:
    """Grouped-query heads: which key/value head each query head uses."""

    kind: ClassVar[str] = "groups"
    heads: int
    kv_heads: int
    size: int  # query heads per key/value head
    d_k: int
    d_v: int
    k_columns: int  # kv_heads · d_k
    v_columns: int  # kv_heads · d_v
    groups: tuple[KVGroup, ...]


@record
class GradGroup:
    index: int  # the key/value head, 0-based
    heads: tuple[int, ...]  # its query heads, 0-based
    dK: NumRows
    dK_exact: bool
    dV: NumRows
    dV_exact: bool


@record
class GradGroups:
    """Backward through shared K and V: each key/value head's gradient is the sum over its query heads."""

    kind: ClassVar[str] = "backward_groups"
    groups: tuple[GradGroup, ...]


def groups_step(spec: Spec) -> Groups | None:
    """The grouped-query step of a spec with fewer key/value heads than query heads, else None."""
    if not spec.is_grouped:
        return None
    G = spec.kv_groups
    d_k, d_v = len(spec.K[0]) // G, len(spec.V[0]) // G
    return Groups(
        spec.heads,
        G,
        spec.heads // G,
        d_k,
        d_v,
        len(spec.K[0]),
        len(spec.V[0]),
        tuple(
            KVGroup(
                g, g * d_k, d_k, g * d_v, d_v, tuple(h for h in range(spec.heads) if group_of(h, spec.heads, G) == g)
            )
            for g in range(G)
        ),
    )


def kv_of(spec: Spec, head: int) -> int | None:
    """The key/value head (0-based) a query head uses, where heads are grouped; else None."""
    return group_of(head, spec.heads, spec.kv_groups) if spec.is_grouped else None


def grad_groups_step(spec: Spec, shown: dict[str, NumRows], is_exact) -> GradGroups | None:
    """The backward step that adds each group's dK and dV, for grouped heads; else None."""
    step = groups_step(spec)
    if step is None:
        return None

    def part(name: str, first: int, width: int) -> NumRows:
        return tuple(row[first : first + width] for row in shown[name])

    out = []
    for g in step.groups:
        dK = part("dK", g.first, g.width)
        dV = part("dV", g.first_v, g.width_v)
        out.append(GradGroup(g.index, g.heads, dK, is_exact(dK), dV, is_exact(dV)))
    return GradGroups(tuple(out))


def modern_inputs(spec: Spec) -> dict[str, object]:
    """What ``compute`` reports of grouped heads (which key/value head each query head uses, 0-based as
    the heads list) and of the variants' settings (nothing where none is set)."""
    from symattn import variants

    out: dict[str, object] = {}
    if spec.is_grouped:
        out["kv_heads"] = spec.kv_groups
        out["kv_head_of"] = [kv_of(spec, h) for h in range(spec.heads)]
    return {**out, **variants.report(spec)}
