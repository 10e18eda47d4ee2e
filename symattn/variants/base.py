"""What a variant of attention is (a *part*) and where it acts.

A part is one module of :mod:`symattn.variants` that owns everything about one variant, as PyTorch's
FlexAttention writes a distance bias or a cap on the scores as one small ``score_mod(score, b, h, q_idx,
kv_idx)`` and a window as one ``mask_mod``; here each carries its exact, enclosure, derivation and backward
sides too. Parts compose in the order of their *stage*, the same for every head (docs/internals.md names
the parts of each):

    QK           Q and K to the scores S: turned by position, say (S = Q′K′ᵀ; plain: S = QKᵀ)
    (the core)   z = S · scale
    ADD          + a term over the part's own basis (a slope times the distance |i − j|)
    MAP          a monotone map of z (c·tanh(z/c))
    MASK         where a query may attend (a sliding window, the causal diagonal's alignment)
    DENOMINATOR  a term in every softmax denominator (e^s of a logit s that has no value)
    ROUTE        how the softmax and ×V are walked (the keys in blocks, online): changes no value

A part has two faces. Its :class:`Part` (one object per module) reads and checks its spec keys, says what
it supports (symbols, ``inputs = "rounded"``, ``--certify``, the float64 path) with the one-line refusal
where it does not, declares its claimable quantities, and makes its derivation steps. Its head part (one
frozen object per head of a model, a subclass of :class:`HeadPart` for its stage) carries the exact
transform and its rules: the model (:class:`~symattn.exact.model.Model`) holds the head parts in stage
order and asks them, never testing types. How z's exact form is built from them, and what is decided on
it, is :mod:`symattn.variants.forms`.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

from symattn.input.errors import brief
from symattn.input.records import record

if TYPE_CHECKING:
    from symattn.exact.numeric import Fixed
    from symattn.input.reader import Reader

QK, ADD, MAP, MASK, DENOMINATOR, ROUTE = range(6)  # the stages, in the order they act
PLACE = -1  # where the tokens stand (positions): read by the parts that count them, before any acts
Rows = tuple[tuple[Fraction | None, ...], ...]  # a quantity's exact values where rational, else None


@record
class Where:
    """What a part's reader may need of the spec read so far."""

    heads: int
    d_k: int  # one head's width of Q and K
    n_q: int
    n_k: int
    symbolic: bool  # a formula in Q, K or V
    symbolic_qk: bool  # a formula in Q or K
    causal: bool = False  # mask = "causal" (for the mask stage)
    turned: tuple[int, int] | None = None  # (first, width): the only columns of a head a Q/K part may turn


@record
class Quantity:
    """A quantity of a part that claims may name and compute writes (one head's, claimed ``hN.`` with several).

    ``before``: the core quantity it comes right before in the derivation's order (None: after every
    other gradient). ``rows`` and ``cols``: what they are (``token``, ``key``, ``dim``; None where there
    are none: a column of one number per query has no ``cols``, a scalar neither). ``width``: the head's
    columns of Q ("d_q") where ``cols`` is ``dim``. ``asked_by``: the ``decimals`` field that asks for
    its decimals. ``needs``: how a claim on it without the part is refused (``claims on X need …``).
    ``shared``: every head has the same value, so a claim needs no head (its ``hN.`` names the same one).
    """

    name: str
    before: str | None
    rows: str | None = "token"
    cols: str | None = "key"
    width: str = "keys"
    gradient: bool = False
    asked_by: str | None = None
    needs: str = ""  # "": every spec has it
    inner: str | None = None  # a third index after rows and cols ([b][i][c]: held as row b·n + i, column c)
    shared: bool = False  # one value for every head (MLA's c_KV): claimed plain, and hN. names the same value


@record
class KernelNumber:
    """A number of a part's setting as its kernel keyword takes it on a spec's float64 path (``compare SPEC``):
    exactly the binary value a kernel saw, so it must be a float64 value (``kernel/spec_variants.py`` refuses
    one that is not). ``value`` None: the setting's number is not rational (the paper's slope 2^(−8/3))."""

    value: Fraction | None
    text: str  # as the spec writes it (or as its number reads, for the paper's slopes)
    key: str
    position: tuple[int, ...] | None = None  # 1-based, in the key's list


class Part:
    """One variant, as the spec, the checker, compute and the derivation see it (one object per module).

    Every hook has a default that does nothing, so a part defines only what it changes.
    """

    name: ClassVar[str]  # its name in the registry and in ``MatrixForm.parts`` (its first key)
    keys: ClassVar[tuple[str, ...]]  # its spec keys, as they are listed
    stage: ClassVar[int]
    title: ClassVar[str]  # how a message names it
    noun: ClassVar[str] = ""  # how compare's float64 refusal names it; the title if empty
    unstated: ClassVar[tuple[str, ...]] = ()  # keys an exercise sheet does not put into words
    web_fields: ClassVar[tuple[Mapping[str, Any], ...]] = ()  # its entries in the web page's variant area
    quantities: ClassVar[tuple[Quantity, ...]] = ()  # claimable, in the order of the derivation
    step_kinds: ClassVar[tuple[str, ...]] = ()  # the kinds of its own steps (a template each)
    facts: ClassVar[tuple[tuple[str, str, Any], ...]] = ()  # (step kind, fact, value without it): see Facts
    attributes: ClassVar[tuple[str, ...]] = ()  # what ``spec.<name>`` reads (its name's setting by default)
    rounded_inputs: ClassVar[bool] = False  # check's input-rounding (inputs = "rounded") covers it
    rounded_read: ClassVar[bool] = False  # where it does not: True if its reader refuses, else the checker
    turns_slice: ClassVar[bool] = False  # a Q/K part that turns only ``Where.turned`` where it is given
    certify: ClassVar[str] = ""  # the refusal of ``compute --certify``; "" where it is covered
    z_word: ClassVar[str | None] = None  # how a check report names the z it makes ("biased", "capped")

    # --- the spec ------------------------------------------------------------------------------------

    def read(self, reader: Reader, data: Mapping[str, Any], where: Where) -> Any:
        """Its setting, from its keys (None where the spec does not have it); one-line errors name the key."""
        return None

    def check(self, reader: Reader, setting: Any, symbolic: bool) -> None:
        """Refuse what it does not combine with, once the command line's options are applied."""

    def lacks(self, setting: Any, name: str) -> str | None:
        """What a claim on one of its quantities needs that this setting does not give (None: claimable)."""
        return None

    def head(self, setting: Any, index: int) -> Any:
        """The setting of one head (0-based) of several."""
        return setting

    def attribute(self, setting: Any, name: str) -> Any:
        """``spec.<name>`` for one of its ``attributes`` (the setting, None without it, by default)."""
        return setting

    def operand(self, setting: Any, sig: Any, i: int, k: int) -> Any:
        """ADD or MAP: what a wrong scaled score's explanation shows of it (``sig(quantity, i, k)``: an exact
        value to six significant digits)."""
        return None

    def shape(self, spec: Any, setting: Any, quantity: str) -> tuple[int, ...] | None:
        """The shape of one of its quantities claimed whole, where the queries and keys do not give it."""
        return None

    def view(self, setting: Any, model: Any) -> Any:
        """ROUTE: the object that answers its quantities of one head's model (rationals, rounding, closed forms)."""
        return None

    def carried(self, chain: Any, model: Any, setting: Any, quantity: str, row: int, col: int | None, head: Any) -> Any:
        """ROUTE: one of its quantities from the claimant's own numbers before it (None: not its own)."""
        return None

    def carried_core(self, chain: Any, setting: Any, quantity: str, row: int, col: int | None, head: Any) -> Any:
        """ROUTE: a core quantity (a score, an output entry) carried from the claimant's numbers of its own
        route, where they claimed them (None: the core's rule)."""
        return None

    def after_weighted(self, spec: Any, model: Any, fig: Any) -> tuple[Any, ...]:
        """ROUTE: its steps after the weighted sum."""
        return ()

    explains: ClassVar[bool] = False  # ROUTE: a wrong claim on its quantities is explained (``route_operands``)

    def route_operands(self, explainer: Any, setting: Any, quantity: str, row: int, col: int, head: Any) -> Any:
        """ROUTE: a wrong claim's (number, number) pairs of its dot product (``explains``)."""
        return None

    def computed(self, spec: Any, setting: Any, model: Any) -> dict[str, Any]:
        """ROUTE: what compute writes of it beside its quantities (whether its route is the softmax's, exactly)."""
        return {}

    # --- a part that makes Q, K and V from inputs of its own (MLA's [mla] table) --------------------------

    def inputs(self, reader: Reader, data: Mapping[str, Any]) -> tuple[Any, Any, Any, str] | None:
        """Q, K, V (numerals) made from its own keys, and what their rows are (None where it makes none)."""
        return None

    def turned(self, reader: Reader, data: Mapping[str, Any]) -> tuple[int, int] | None:
        """The columns of each head, (first, width), that alone may be turned by position, where its made Q
        and K hold columns no turn may touch (MLA's decoupled dims); None: every column, or none made."""
        return None

    def check_spec(self, reader: Reader, setting: Any, spec: Any) -> None:
        """Refuse a setting of the whole spec it does not combine with, once the command line's are applied."""

    def before_scores(self, spec: Any, model: Any) -> tuple[Any, ...]:
        """Its steps before the scores (how the Q, K, V it made came about)."""
        return ()

    def before_heads(self, spec: Any, models: tuple[Any, ...]) -> tuple[Any, ...]:
        """With several heads, its steps said once before them: what every head shares (each head's own step
        then says only what is the head's)."""
        return ()

    def carried_input(self, chain: Any, setting: Any, quantity: str, row: int, col: int) -> Any:
        """Q, K or V that it made, from the claimant's own numbers before them (None: the spec's value)."""
        return None

    def input_operands(self, explainer: Any, setting: Any, quantity: str, row: int, col: int) -> Any:
        """A wrong claim on Q, K or V that it made: the (number, weight) pairs of its dot product (None: none)."""
        return None

    def head_part(self, setting: Any, spec: Any) -> HeadPart | None:
        """Its part of one head's exact model (None where it has none: a mask is in ``spec.allowed``)."""
        return None

    # --- MASK: its mask_mod, which the spec's reader ANDs with the mask and the key padding --------------

    @staticmethod
    def allows(setting: Any, causal: bool, i: int, j: int) -> bool:
        """Whether query i may attend key j (under the causal mask too, when ``causal``)."""
        return not causal or j <= i

    @staticmethod
    def restricts(setting: Any) -> bool:
        """Whether it may block a key where the mask does not (else the reader need not go through them)."""
        return False

    @staticmethod
    def empty_row(setting: Any, i: int, n_k: int) -> tuple[str, str] | None:
        """(key, why) to blame where row i has no key left and it alone explains why; else None."""
        return None

    def kernel_mask(self, n: int, m: int, causal: bool, align: str, window: Any) -> Any:
        """Its mask_mod on the float64 path, from symattn.kernel.compare's keywords: a numpy array of booleans
        over n queries and m keys, or None where every key is allowed."""
        return None

    # --- what it supports -------------------------------------------------------------------------------

    def kernel_numbers(self, setting: Any) -> tuple[KernelNumber, ...]:
        """Its setting of one head as its ``kernel_rule`` takes it on a spec's float64 path: one number
        (``kernel_per_head`` False, the keyword's float) or the head's own (a list of one per head)."""
        return ()

    kernel_per_head: ClassVar[bool] = False  # its keyword holds one number per head (else one for all)
    float64_in_mask: ClassVar[bool] = False  # True: all it does is in ``spec.allowed``, which the path takes
    # the keyword a kernel's call takes it by (FlashAttention's), which symattn.kernel.compare reads, and its
    # refusal there for a part without a kernel_rule; "" where the call has no such keyword
    argument: ClassVar[str] = ""
    argument_refusal: ClassVar[str] = ""
    # the rule of symattn/kernel/score_mods.py that takes its keyword on the in-memory float64 path ("": none)
    kernel_rule: ClassVar[str] = ""
    certified: ClassVar[bool] = False  # ``compute --certify --float64`` (version 3) takes its kernel rule

    # --- a sweep (symattn sweep): its [grid] key, the kernel's keyword from a grid point, its torch side in ---
    # FlashAttention's naive reference; torch is imported inside the hooks, only when a sweep runs

    grid_key: ClassVar[str] = ""  # its key in a sweep's [grid] table; "" where a sweep has none
    # its quantities that are products and sums of the given decimals: exact decimals, no rounding on the way
    exact_products: ClassVar[tuple[str, ...]] = ()
    # what an exercise sheet states of a part that turns Q and K (its exact_turn), where those are exact
    turn_quantities: ClassVar[tuple[str, ...]] = ()
    angles: ClassVar[tuple[str, ...]] = ()  # its angles: claimed in degrees or as multiples of π too ("3pi/4")

    def exact_turn(self, spec: Any) -> Any:
        """The turn_quantities of each token, exactly, as a sheet states them (a part with turn_quantities)."""
        raise NotImplementedError

    # the kind a sweep (and compare) checks of its keyword's own gradient, and that gradient's noun; "": none
    gradient: ClassVar[str] = ""
    gradient_noun: ClassVar[str] = ""
    drawn: ClassVar[bool] = False  # a sweep draws its keyword from the seed, one number per head (float32)

    @property
    def keyword(self) -> str:
        """The keyword a sweep's kernel call takes it by: ``argument``, else its grid key."""
        return self.argument or self.grid_key

    def grid_refusal(self, entry: Any) -> str | None:
        """Why an entry of its [grid] list is refused (the message after the key), or None: true or false here."""
        return None if type(entry) is bool else f"expected true or false, got {brief(entry)}"

    def grid_value(self, entry: Any) -> Any:
        """An accepted entry as a case's point holds it."""
        return entry

    def sweep_argument(self, value: Any, heads: int, drawn: Any) -> Any:
        """Its keyword's value for a grid point's ``value`` (``drawn``: the seed's numbers, where it is drawn),
        or None where the point leaves it off (false, or a 0 that means none)."""
        return value or None

    def score_mod(self, argument: Any, scores: Any, i: Any, j: Any, causal: bool, align: str) -> Any:
        """Its step of the naive reference on a torch tensor of scores (``argument``: its keyword's value, None
        where off; i and j: the query and key indices as columns), in the order of the stages: a new score,
        a mask, or more columns (logits with no value, dropped after the softmax)."""
        return scores

    # --- compute and the derivation ---------------------------------------------------------------------

    def report(self, spec: Any, setting: Any) -> dict[str, Any]:
        """What ``compute`` reports of its setting beside the inputs."""
        return {}

    def toy(self, spec: Any, setting: Any) -> tuple[tuple[str, Any], ...]:
        """Its facts of the closing "toy vs real" table (``facts`` of kind ``toy_vs_real``)."""
        return ()

    def hidden_width(self, setting: Any) -> int | None:
        """d_model: the width of the hidden rows it makes Q, K and V from (None where it makes none)."""
        return None

    def scores_step(self, spec: Any, model: Any, fig: Any) -> tuple[Any, Any, Any] | None:
        """QK: its step before the scores, and the Q and K whose dot products the scores step shows."""
        return None

    def z_step(self, spec: Any, model: Any, fig: Any, shown: Any) -> Any:
        """ADD or MAP: its step after the scaling; ``shown(*stages)`` is the unmasked z of the head
        without the parts of those stages, as the document shows them."""
        return None

    def masking(self, spec: Any, setting: Any) -> Any:
        """MASK: what the masking step shows of it (None: nothing)."""
        return None

    def softmax_facts(self, spec: Any, fig: Any, row: int) -> tuple[tuple[str, Any], ...]:
        """DENOMINATOR: its facts of a softmax row (its term as shown, …)."""
        return ()

    def after_softmax(self, spec: Any, fig: Any) -> tuple[Any, ...]:
        """DENOMINATOR: its steps after the softmax's."""
        return ()

    def backward_fact(self, spec: Any, model: Any, fig: Any, shown: Mapping[str, Any], head: int) -> Any:
        """Its share of the backward step after the softmax's (a fact of ``backward_variants``), or None."""
        return None

    def backward_inputs(self, spec: Any, model: Any) -> tuple[Any, Any] | None:
        """QK: the Q and K whose products dQ and dK show (None: the spec's)."""
        return None

    def backward_after_qk(self, spec: Any, model: Any, shown: Mapping[str, Any], key: int) -> tuple[Any, ...]:
        """QK: its backward steps after dQ and dK's."""
        return ()


class HeadPart:
    """A part's share of one head's exact model: frozen constants and the rules of its stage, each taking
    the model. What depends on the model alone is cached on the model (``model.memo``), so that the same
    head part serves a copy of the model with another mask."""

    stage: ClassVar[int]
    quantities: ClassVar[tuple[str, ...]] = ()  # its own quantities: exact, rational entries, enclosures
    computed: ClassVar[tuple[str, ...]] = ()  # those compute writes, in order
    columns: ClassVar[tuple[str, ...]] = ()  # its quantities of one number per query (compute writes lists)
    large: ClassVar[tuple[str, ...]] = ()  # its quantities that may need bits above the point (like exp)
    exposes: ClassVar[tuple[str, ...]] = ()  # what ``model.<name>`` reads from it (``expose``)
    gradients: ClassVar[tuple[str, ...]] = ()  # the gradients its rule adds (a denominator's: one per head)
    silent: ClassVar[tuple[str, ...]] = ()  # gradients a wrong claim's explanation leaves to the document
    # a Q/K part's quantities whose rows make the scores, Q′ and K′ (a score's partial products are theirs)
    factors: ClassVar[tuple[str, str] | None] = None

    def expose(self, model: Any, name: str) -> Any:
        return getattr(self, name)

    def exact(self, model: Any, quantity: str) -> Any:
        raise ValueError(quantity)

    def rationals(self, model: Any, quantity: str) -> Rows | None:
        """The rational entries of a quantity where this part decides them; None: the core's rule."""
        return None

    def boxes(self, boxes: Any, quantity: str) -> list[Fixed]:
        raise ValueError(quantity)

    def gradient(self, model: Any) -> Any:
        """Its rule of the backward pass over this model (:mod:`symattn.exact.gradients`), or None."""
        return None

    # the claimant's numbers carried forward (symattn.checking.chain) and a wrong claim's operands
    # (symattn.checking.explain): None where the core's rule holds

    def implied(self, chain: Any, model: Any, quantity: str, row: int, col: int | None, head: int | None) -> Any:
        return None

    def operands(self, explainer: Any, model: Any, quantity: str, i: int, k: int, head: int | None) -> Any:
        return None

    def explained(self, explainer: Any, model: Any, quantity: str, row: int | None, head: int | None) -> Any:
        """The operands of a wrong claim on one of its own quantities of a row or a head (None: not its own)."""
        return None


def listed(words: list[str]) -> str:
    """ "a, b or c"."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


__all__ = [
    "ADD",
    "DENOMINATOR",
    "MAP",
    "MASK",
    "PLACE",
    "QK",
    "ROUTE",
    "KernelNumber",
    "HeadPart",
    "Part",
    "Quantity",
    "Where",
    "listed",
]
