"""``symattn compare`` for the layouts of 2026 and split-KV partials, from a spec and files: the engine of
``symattn.kernel.compare``, with the CLI as a thin shell.

A spec that gives a layout key (``cu_seqlens_q``, ``block_table``, a descale, …; or any spec with
``--partials``) is read as compare's arguments (:mod:`symattn.input.kernel_spec`), its results as arrays
in their formats (or ``--dtype``'s), and :func:`symattn.kernel.oracle.judged` or
:func:`symattn.kernel.partials.compare_partials` make the report, the same figures and places as in
memory; a file's result is named as ``symattn compare`` names every result (``o``, ``lse``, ``dq``), a
partial by its tensor (``partials_out[1][…]``). The engine names its arguments in its one-line errors
(``cu_seqlens_q: …``); here each is named as the spec gives it: the spec, the key and the file
(``spec.toml: cu_seqlens_q: 'cu_q.npy'[2]: 3 is less than [1] (5): the offsets may not decrease``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from symattn import variants
from symattn.input.errors import SpecError, brief, numpy_index
from symattn.input.floats import read_tensor, read_tensors
from symattn.input.kernel_spec import VARIANT_KEYS, KernelSpec
from symattn.kernel import oracle, report, spec_variants
from symattn.kernel.comparison_report import WORST
from symattn.kernel.partials import PartialsReport, compare_partials

ARGUMENTS = {"q": "Q", "k": "K", "v": "V"}  # the engine's argument and the spec's key, where they differ
SETTINGS = ("causal_align", "window", "scale", "layout", "mask", *VARIANT_KEYS, variants.ORDER_KEY)  # no file
OPTIONS = {"kind": "--quantity", "splits": "--splits", "lse_base": "--lse-base"}
PARTIALS = ("partials_out", "partials_lse", "out", "lse")  # the tensors of a --partials file


def compare_spec(
    table: Any,
    path: str,
    results: list[str],
    partials: bool,
    tolerances: tuple[Any, Any, Any],
    every: bool,
    options: dict[str, Any],
) -> report.Report | PartialsReport:
    """``symattn compare`` of a spec's table read as compare's arguments (a layout's, or ``--partials``):
    ``options`` are the command's quantity, lse_base, dtype, grad_output, naive and splits; ``every``: --all."""
    from pathlib import Path

    from symattn.input.kernel_spec import read_kernel_spec

    listed = None if every else WORST
    folder = Path(path).parent
    if not partials:
        if options["splits"] is not None:
            raise SpecError("--splits", None, "is for --partials: the splits of a split-KV kernel's keys")
        spec = read_kernel_spec(table, str(path), folder, "a layout's files")
        q, base, dtype, grad, naive = (options[k] for k in ("quantity", "lse_base", "dtype", "grad_output", "naive"))
        return compare_files(spec, results, q, base, dtype, grad, naive, tolerances, listed)
    for option in ("naive", "grad_output"):
        if options[option] is not None:
            flag = "--" + option.replace("_", "-")
            raise SpecError(flag, None, "is not for --partials, which compares O_i and LSE_i with the exact values")
    if options["quantity"] != "output" or len(results) != 1:
        wrong = "--quantity" if options["quantity"] != "output" else "RESULT"
        raise SpecError(wrong, None, "--partials takes one .safetensors file of the O_i and LSE_i, and no --quantity")
    spec = read_kernel_spec(table, str(path), folder, "--partials")
    return compare_partials_file(
        spec, results[0], options["splits"], options["lse_base"], options["dtype"], tolerances, listed
    )


def compare_files(
    spec: KernelSpec,
    results: list[str],
    quantity: str,
    lse_base: str,
    dtype: str | None,
    grad_output: str | None,
    naive: str | None,
    tolerances: tuple[Any, Any, Any],
    listed: int | None,
) -> report.Report:
    """The report of ``symattn compare SPEC RESULT…`` for a spec of a layout: each result (a kernel's O, LSE,
    dQ, dK or dV, with its axes) against the exact values; ``tolerances``: rtol, atol and --max-ulp."""
    if quantity == "weights":
        raise SpecError("--quantity", None, f"weights: {spec.layout_key} takes output, lse, dq, dk, dv or dsink")
    outs = [read_tensor(path, dtype) for path in results]
    reference = None if naive is None else read_tensor(naive, dtype)
    dout, named = (None, grad_output) if grad_output is None else (read_tensor(grad_output), grad_output)
    if dout is None and spec.dout is not None and quantity in ("dq", "dk", "dv", "dsink"):  # the spec's [backward] dO
        dout = spec.dout
        named = f"{spec.source}: backward.grad_output: {brief(spec.files['backward.grad_output'], 200)}"
    rtol, atol, bound = tolerances
    packing = spec.packing
    if spec.variants:  # the variants' keywords, as the API takes them
        given = dict(spec.variants)
        order = given.pop(variants.ORDER_KEY, None)
        packing = {**packing, "variants": spec_variants.keywords(spec.source, given), "order": order}
    with located(spec, {"dout": named, "reference": naive}):
        return oracle.judged(
            outs if len(outs) > 1 else outs[0],
            spec.q,
            spec.k,
            spec.v,
            quantity,
            dout,
            spec.keywords,
            packing,
            None,
            reference,
            rtol,
            atol,
            bound,
            lse_base,
            listed,
            symbol=None,
            sources=tuple(results),
            reference_name=naive or "reference",
        )


def compare_partials_file(
    spec: KernelSpec,
    path: str,
    splits: str | None,
    lse_base: str,
    dtype: str | None,
    tolerances: tuple[Any, Any, Any],
    listed: int | None,
) -> PartialsReport:
    """The report of ``symattn compare SPEC FILE --partials``: the ``.safetensors`` file's ``partials_out``
    (splits, B, H, N, D) and ``partials_lse`` (splits, B, H, N), as FlashAttention's num_splits accumulators
    hold them, and its merged ``out`` and ``lse`` where it has them, against the exact values. ``splits``:
    a count or the key offsets (``0,40,100``); None: the count is partials_out's first axis. A varlen or paged
    spec's partials are in its layout (splits first), each sequence splitting its own keys (kernel/partials)."""
    descale = next((k for k in ("q_descale", "k_descale", "v_descale") if k in spec.packing), None)
    if descale is not None:
        raise SpecError(spec.source, descale, "--partials takes Q, K and V, with varlen's or a paged cache's keys")
    for key in (*spec.variants, "backward"):
        if key in spec.variants or spec.dout is not None:
            raise SpecError(spec.source, key, "not taken with --partials, which compares each split's O_i and LSE_i")
    tensors = read_tensors(path, dtype)
    for name in ("partials_out", "partials_lse"):
        if name not in tensors:
            raise SpecError(path, None, f"no tensor named {name!r}; --partials reads {', '.join(PARTIALS)}")
    unknown = sorted(set(tensors) - set(PARTIALS))
    if unknown:
        raise SpecError(path, None, f"a tensor named {brief(unknown[0])}; --partials reads {', '.join(PARTIALS)}")
    rtol, atol, bound = tolerances
    places = {name: f"{path}:{name}" for name in PARTIALS}
    with located(spec, places):
        given = _splits(splits) if splits is not None else len(tensors["partials_out"].values)
        return compare_partials(
            tensors["partials_out"],
            tensors["partials_lse"],
            spec.q,
            spec.k,
            spec.v,
            splits=given,
            out=tensors.get("out"),
            lse=tensors.get("lse"),
            lse_base=lse_base,
            rtol=rtol,
            atol=atol,
            max_ulp=bound,
            worst=listed,
            source=path,
            **spec.keywords,
            **spec.packing,
        )


def _splits(text: str) -> int | list[int]:
    """--splits as typed: a count (``4``) or the key offsets (``0,40,100``)."""
    parts = text.split(",")
    if not all(p.strip().isascii() and p.strip().isdigit() and len(p.strip()) <= 9 for p in parts):
        raise SpecError(
            "splits", None, f"expected a count such as 4 or key offsets such as 0,40,100, got {brief(text)}"
        )
    numbers = [int(p) for p in parts]
    return numbers[0] if len(numbers) == 1 else numbers


@contextmanager
def located(spec: KernelSpec, given: Mapping[str, str | None]) -> Iterator[None]:
    """The engine's one-line errors, which name its arguments, named as the spec and the command line give
    them: the spec file, its key and the file it names; an option; a result file (``given``: argument →
    the file or tensor it was read from)."""
    try:
        yield
    except SpecError as exc:
        raise relocated(exc, spec, given) from None


def relocated(exc: SpecError, spec: KernelSpec, given: Mapping[str, str | None]) -> SpecError:
    key = ARGUMENTS.get(exc.source, exc.source)
    detail = f"{exc.key}: {exc.problem}" if exc.key else exc.problem
    kind = type(exc)
    if key in spec.files:  # a place in the file's array, as numpy indexes it: 'q.npy'[0, 0, 2, 5]
        at = numpy_index(exc.index) if exc.index and not exc.key else ""
        return kind(spec.source, key, f"{brief(spec.files[key], 200)}{at}: {detail}", exc.position)
    if key in SETTINGS:
        return kind(spec.source, key, detail, exc.position, exc.index)
    if key in OPTIONS:
        return kind(OPTIONS[key], None, detail, exc.position, exc.index)
    if given.get(exc.source):
        return kind(str(given[exc.source]), exc.key, exc.problem, exc.position, exc.index)
    return exc


__all__ = ["compare_files", "compare_partials_file", "compare_spec", "located", "relocated"]
