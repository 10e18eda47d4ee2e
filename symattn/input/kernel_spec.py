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

from symattn.input.errors import brief
from symattn.input.reader import Reader, check_keys, kind_of
from symattn.input.records import record

INTEGER_KEYS = ("cu_seqlens_q", "cu_seqlens_k", "block_table", "seqlens_k")  # as flash_attn names them
DESCALE_KEYS = ("q_descale", "k_descale", "v_descale")  # flash_attn_3's, float32 per (batch, kv head)
LAYOUT_KEYS = INTEGER_KEYS + DESCALE_KEYS
# the keys such a spec takes: the tensors, and the settings compare's keywords have
TAKEN = ("Q", "K", "V", "layout", "mask", "causal_align", "window", "scale", *LAYOUT_KEYS)


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
    return KernelSpec(source, arrays["Q"], arrays["K"], arrays["V"], packing, keywords, files)


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
