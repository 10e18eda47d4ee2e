"""A spec read as ``symattn.kernel.compare``'s arguments: the kernel's tensors as saved, for the layouts of
2026 (varlen, paged KV caches, FP8 descales) and split-KV partials (``symattn compare --partials``).

Their shapes are no spec's matrices ((total, heads, d) packed sequences, (blocks, block size, kv heads, d)
caches), so such a spec is not built into a :class:`~symattn.input.spec.Spec`: its files are read here as
arrays, its few settings as compare's keywords, and ``symattn compare`` hands them to the engine that
``symattn.kernel.compare`` runs (:mod:`symattn.kernel.spec_layouts`), which checks how they fit together.
Integer files (``cu_seqlens_q``, ``block_table``, …) are whole numbers only, read without pickle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from fractions import Fraction
from pathlib import Path
from typing import Any

from symattn import variants
from symattn.input.errors import brief
from symattn.input.reader import Reader, check_keys, kind_of
from symattn.input.records import record

INTEGER_KEYS = ("cu_seqlens_q", "cu_seqlens_k", "block_table", "seqlens_k")  # as flash_attn names them
DESCALE_KEYS = ("q_descale", "k_descale", "v_descale")  # flash_attn_3's, float32 per (batch, kv head)
LAYOUT_KEYS = INTEGER_KEYS + DESCALE_KEYS
# the keys such a spec takes: the tensors, and the settings compare's keywords have
VARIANT_KEYS = variants.kernel_arguments()  # compare's keywords of the parts with a kernel rule
TAKEN = (
    *("Q", "K", "V", "layout", "mask", "causal_align", "window", "scale", "backward"),
    *(*VARIANT_KEYS, variants.ORDER_KEY, *LAYOUT_KEYS),
)


@record
class KernelSpec:
    """compare's arguments from a spec file: q, k, v (tensorfile.Array), the layout's arrays (``packing``:
    int64 for the integer keys, an Array for a descale) and the keywords (causal, causal_align, window,
    scale, layout)."""

    source: str
    q: Any
    k: Any
    v: Any
    packing: dict[str, Any] = field(default_factory=dict)
    keywords: dict[str, Any] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # spec key -> the file it names, as written
    dout: Any = None  # [backward] grad_output: the dO of --quantity dq, dk and dv (tensorfile.Array)
    # the variants' keywords: a file's Array, or the numbers written (variants.base.KernelNumber)
    variants: dict[str, Any] = field(default_factory=dict)

    @property
    def layout_key(self) -> str | None:
        """The first layout key the spec gives (None: Q, K and V alone, as --partials takes them)."""
        return next((k for k in LAYOUT_KEYS if k in self.packing), None)


def names_layout(data: Mapping[str, Any]) -> bool:
    """Whether a spec's table gives any layout key (``cu_seqlens_q``, ``block_table``, a descale, …)."""
    return any(key in data for key in LAYOUT_KEYS)


def read_kernel_spec(data: Mapping[str, Any], source: str, folder: Path | None, why: str) -> KernelSpec:
    """The spec's files and settings as compare's arguments; ``why`` names what takes them (a layout key or
    ``--partials``) in the line that refuses any other key."""
    from symattn.input import filematrix
    from symattn.input.batched import LAYOUTS
    from symattn.input.spec import SPEC_KEYS

    reader = Reader(source, folder)
    if not isinstance(data, Mapping):
        raise reader.error(None, f"expected a table of spec keys, got {kind_of(data)}")
    check_keys(reader, data, SPEC_KEYS + LAYOUT_KEYS)
    for key in data:
        if key not in TAKEN:
            raise reader.error(key, f"not taken with {why}: such a spec gives {', '.join(TAKEN)}")
    files: dict[str, str] = {}
    arrays: dict[str, Any] = {}
    packing: dict[str, Any] = {}
    for key in ("Q", "K", "V", *LAYOUT_KEYS):
        if key not in data:
            if key in "QKV":
                raise reader.error(key, "missing")
            continue
        raw = data[key]
        if not filematrix.names_file(raw):
            raise reader.error(key, f"expected a .npy or .safetensors file name (the tensor as saved), got {_got(raw)}")
        files[key] = str(raw)
        if key in INTEGER_KEYS:
            packing[key] = filematrix.read_integers(str(raw), key, source, folder)
        elif key in DESCALE_KEYS:
            packing[key] = filematrix.read_array(str(raw), key, source, folder)
        else:
            arrays[key] = filematrix.read_array(str(raw), key, source, folder)
    dout = None
    if "backward" in data:  # dO of the gradients, as a plain spec's [backward] names it
        given = _grad_output(reader, data["backward"], why)
        files["backward.grad_output"] = given
        dout = filematrix.read_array(given, "backward.grad_output", source, folder)
    mask = data.get("mask", "none")
    if mask not in ("none", "causal"):
        raise reader.error("mask", f"expected 'causal' or 'none' with {why}, got {_got(mask)}")
    keywords = {
        "causal": mask == "causal",
        "causal_align": data.get("causal_align", "top-left"),
        "window": data.get("window"),
        "scale": _scale(reader, data),
        "layout": reader.choice(data.get("layout", "bhnd"), "layout", LAYOUTS),
    }
    made: dict[str, Any] = {key: _variant(reader, data[key], key, files) for key in VARIANT_KEYS if key in data}
    if variants.ORDER_KEY in data:  # compare's keyword as it is (FlashAttention's order where it is not given)
        refused = variants.order_refusal(data[variants.ORDER_KEY])
        if refused is not None:
            raise reader.error(variants.ORDER_KEY, refused)
        made[variants.ORDER_KEY] = data[variants.ORDER_KEY]
    return KernelSpec(source, arrays["Q"], arrays["K"], arrays["V"], packing, keywords, files, dout, made)


def _variant(reader: Reader, raw: Any, key: str, files: dict[str, str]) -> Any:
    """A variant's keyword as written: a file or a list of its numbers (one per head), or its one number;
    kernel/spec_layouts.py takes each as the float it must be."""
    from symattn.input import filematrix
    from symattn.variants.base import KernelNumber

    per_head = variants.kernel_per_head(key)
    if per_head and filematrix.names_file(raw):
        files[key] = str(raw)
        return filematrix.read_array(str(raw), key, reader.source, reader.folder)
    if not per_head:
        n = reader.number(raw, key)
        return (KernelNumber(n.value, n.text, key),)
    if not isinstance(raw, list) or not raw:
        got = "an empty list" if raw == [] else _got(raw)
        raise reader.error(key, f"expected a list of numbers (one per head) or a .npy file, got {got}")
    numbers = (reader.number(x, key, (i,)) for i, x in enumerate(raw, 1))
    return tuple(KernelNumber(n.value, n.text, key, (i,)) for i, n in enumerate(numbers, 1))


def _grad_output(reader: Reader, raw: Any, why: str) -> str:
    """``[backward] grad_output = "do.npy"``: the file of dO, the only key such a spec's [backward] takes."""
    from symattn.input import filematrix

    if not isinstance(raw, Mapping):
        raise reader.error("backward", f"expected a table, got {kind_of(raw)}")
    for key in raw:
        if key != "grad_output":
            raise reader.error(f"backward.{key}", f"not taken with {why}: [backward] gives grad_output, dO's file")
    if "grad_output" not in raw:
        raise reader.error("backward.grad_output", "missing: [backward] gives grad_output, dO's file")
    given = raw["grad_output"]
    if not filematrix.names_file(given):
        raise reader.error(
            "backward.grad_output", f"expected a .npy or .safetensors file name (dO as saved), got {_got(given)}"
        )
    return str(given)


def _scale(reader: Reader, data: Mapping[str, Any]) -> Fraction | None:
    """The spec's scale as compare's keyword: None for 1/√d, 'none' as 1, a number exactly as written."""
    if "scale" not in data:
        return None
    scale = reader.scale(data["scale"], "scale")
    if scale == "sqrt":
        return None
    return Fraction(1) if scale == "none" else scale.value


def _got(raw: object) -> str:
    return brief(raw) if isinstance(raw, (str, int, float)) else kind_of(raw)


__all__ = ["DESCALE_KEYS", "INTEGER_KEYS", "LAYOUT_KEYS", "TAKEN", "KernelSpec", "names_layout", "read_kernel_spec"]
