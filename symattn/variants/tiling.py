"""The online softmax (FlashAttention), one part: ``block_keys = B`` walks the keys in blocks of B, keeping
each row's running max m, running sum l and unnormalised accumulator, rescaled by e^(m_old − m_new) as m
grows; at the end O = acc / l and LSE = m + log l. ``split_keys = S`` splits the keys into S parts
(split-KV, FlashDecoding), each with its own (O_s, LSE_s), merged by the weights e^(LSE_s − LSE).

It changes no value: the tiled output *is* the softmax's, which the derivation states and
:meth:`~symattn.variants.tiling_head.Tiled.identity` proves on the closed forms. The row's ``lse`` is
claimable with or without tiling. One head's values, exactly, are :mod:`symattn.variants.tiling_head`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from symattn.exact.num import Num, NumRow
from symattn.input.messages import said
from symattn.input.reader import brief, parse_index
from symattn.input.records import record
from symattn.variants.base import ROUTE, Part, Quantity, Where

if TYPE_CHECKING:  # the spec reads the part without SymPy (compare's float64 path never imports it)
    from symattn.variants.tiling_head import Tiled

# --- limits of block_keys ------------------------------------------------------------------------
TILED_KEYS = 64  # the most keys (and queries) a tiled head shows: every block's closed forms are made


@record
class Setting:
    """Blocks of ``block`` keys (None: one block), and ``split`` parts of the keys (None: no split)."""

    block: int | None
    split: int | None


# --- the steps of a derivation ---------------------------------------------------------------------


@record
class Block:
    """One block of the focus row: its keys (1-based), their z, and m, the rescale, l and acc after it."""

    index: int  # 1-based
    first: int  # its first and last key, 1-based
    last: int
    z: NumRow  # the focus row's z at the block's keys (−∞ where masked)
    m_old: Num  # the running max before it (−∞ before the first)
    m: Num
    rescale: Num
    l_old: Num
    l: Num
    acc: NumRow


@record
class SplitPart:
    """One split of the keys: its range, its own output row O_s and LSE_s, and its merge weight e^(LSE_s − LSE)."""

    index: int
    first: int
    last: int
    output: NumRow
    lse: Num
    weight: Num


@record
class Tiling:
    """The online softmax of the focus row, block by block, and the identity with the softmax's output."""

    kind: ClassVar[str] = "tiling"
    block: int
    blocks: tuple[Block, ...]
    output: NumRow  # acc / l after the last block: the softmax's output row
    lse: Num
    lse_all: NumRow  # every row's
    identity: bool  # the tiled values equal the direct sums and the output, exactly
    splits: tuple[SplitPart, ...] = ()
    # by hand each chain rounds at its own steps: the weighted sum's row as shown, where acc / l ends elsewhere
    rounded_apart: NumRow = ()


# --- the part -------------------------------------------------------------------------------------


class Tiles(Part):
    name = "block_keys"
    keys = ("block_keys", "split_keys")
    stage = ROUTE
    title = "block_keys"
    unstated = keys
    web_fields = (
        {"key": "block_keys", "kind": "number", "min": 1, "max": TILED_KEYS, "default": ""},
        {"key": "split_keys", "kind": "number", "min": 1, "max": TILED_KEYS, "default": ""},
    )
    quantities = (  # after the output: the tiles follow the weighted sum, and the LSE ends them
        Quantity("running_max", None, rows="block", cols="token", asked_by="scaled", needs="block_keys"),
        Quantity("rescale", None, rows="block", cols="token", asked_by="exp", needs="block_keys"),
        Quantity("running_sum", None, rows="block", cols="token", asked_by="exp", needs="block_keys"),
        Quantity("accumulator", None, rows="block", cols="token", inner="dim", asked_by="output", needs="block_keys"),
        Quantity("lse", None, cols=None, asked_by="exp"),
    )
    step_kinds = ("tiling",)
    facts = (("toy_vs_real", "tiling", None),)
    rounded_inputs = True  # it changes no value: what covers the softmax covers it
    float64_in_mask = True
    certify = "--certify does not cover block_keys or split_keys"

    def read(self, reader: Any, data: Mapping[str, Any], where: Where) -> Setting | None:
        """``block_keys = B`` and ``split_keys = S``: whole numbers from 1 to the number of keys."""
        if "block_keys" not in data and "split_keys" not in data:
            return None
        given = {key: _count(reader, data[key], key, where.n_k) for key in self.keys if key in data}
        key = next(iter(given))
        if where.heads > 1:
            raise reader.error(key, said("tiled_heads", heads=where.heads))
        if max(where.n_k, where.n_q) > TILED_KEYS:
            raise reader.limit(key, said("tiled_size", most=TILED_KEYS))
        self.check(reader, True, where.symbolic)
        return Setting(given.get("block_keys"), given.get("split_keys"))

    def check(self, reader: Any, setting: Any, symbolic: bool) -> None:
        if setting is not None and symbolic:
            raise reader.error("block_keys", said("tiled_symbols"))

    def shape(self, spec: Any, setting: Setting | None, quantity: str) -> tuple[int, ...] | None:
        n, keys = len(spec.Q), len(spec.K)
        blocks = -(-keys // (setting.block or keys)) if setting is not None else 1
        d_v = len(spec.V[0])
        return {"running_max": (blocks, n), "rescale": (blocks, n), "running_sum": (blocks, n)}.get(
            quantity, (blocks, n, d_v) if quantity == "accumulator" else None
        )

    def view(self, setting: Setting | None, model: Any) -> Tiled:
        from symattn.variants.tiling_head import Tiled

        return Tiled(model, None if setting is None else setting.block)

    def toy(self, spec: Any, setting: Setting) -> tuple[tuple[str, Any], ...]:
        return (("tiling", setting.block or len(spec.K)),)

    def report(self, spec: Any, setting: Setting | None) -> dict[str, Any]:
        if setting is None:
            return {}
        return {k: v for k, v in (("block_keys", setting.block), ("split_keys", setting.split)) if v is not None}

    def computed(self, spec: Any, setting: Setting, model: Any) -> dict[str, Any]:
        return {"tiled_equals_softmax": self.view(setting, model).identity}

    def carried(self, chain: Any, model: Any, setting: Any, quantity: str, row: int, col: int | None, head: Any):
        from symattn.variants.tiling_chain import carried

        return carried(chain, model, setting, quantity, row, col, head)

    def carried_core(self, chain: Any, setting: Any, quantity: str, row: int, col: int | None, head: Any) -> Any:
        from symattn.variants.tiling_chain import carried_output

        return None if quantity != "output" else carried_output(chain, setting, row, col, head)

    def after_weighted(self, spec: Any, model: Any, fig: Any) -> tuple[Tiling, ...]:
        from symattn.variants.tiling_steps import tiling_step

        setting = spec.setting(self.name)
        return () if setting is None else (tiling_step(spec, model, fig, setting),)


def _count(reader: Any, raw: object, key: str, keys: int) -> int:
    count = parse_index(raw)  # an int, or its digits as the web page sends them
    if count is None:
        raise reader.error(key, said("block_count", keys=keys, got=brief(raw)))
    if not 1 <= count <= keys:
        raise reader.error(key, said("block_count", keys=keys, got=count))
    return count


PART = Tiles()


__all__ = ["PART", "TILED_KEYS", "Block", "Setting", "SplitPart", "Tiles", "Tiling"]
