"""Frozen records: ``@record`` is ``@dataclass(frozen=True)`` at a fraction of the cost of defining it.

A frozen dataclass compiles six methods of its own with ``exec`` (``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, ``__setattr__``, ``__delattr__``), about 1 ms a class, and ``symattn render`` defines some
ninety before it writes a line (issue 29's start-up). A record compiles its ``__init__`` only, and sets up
its fields only when it is first used (most are never made in a run); the other five methods are shared
functions that read the class's fields, and behave as the generated ones do: the same repr, equality of
the same class on the compared fields, the hash of their tuple, and
:class:`dataclasses.FrozenInstanceError` on assignment. ``dataclasses.fields``, ``replace`` and ``asdict``
work on a record, since it is a dataclass.
"""

from __future__ import annotations

import dataclasses
import reprlib
import threading
from collections.abc import Callable
from dataclasses import MISSING, FrozenInstanceError
from operator import attrgetter
from typing import Any, NamedTuple, TypeVar, dataclass_transform, overload

T = TypeVar("T")


@overload
def record(cls: type[T], /) -> type[T]: ...
@overload
def record(*, eq: bool = True) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def record(cls: type[T] | None = None, /, *, eq: bool = True) -> Any:
    """``@record``: a frozen dataclass; ``@record(eq=False)``: one compared by identity, as
    ``@dataclass(frozen=True, eq=False)``."""

    def wrap(cls: type[T]) -> type[T]:
        return _record(cls, eq)

    return wrap if cls is None else wrap(cls)


def _record(cls: type[T], eq: bool) -> type[T]:
    """The shared methods now; the fields, their layout and the ``__init__`` when the class is first used."""
    for name in ("__setattr__", "__delattr__"):
        if name in cls.__dict__:
            raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")
    cls.__setattr__ = _frozen_setattr  # type: ignore[method-assign]
    cls.__delattr__ = _frozen_delattr  # type: ignore[method-assign]
    if "__repr__" not in cls.__dict__:
        cls.__repr__ = _repr  # type: ignore[method-assign]
    if eq:
        if "__eq__" not in cls.__dict__:
            cls.__eq__ = _eq  # type: ignore[method-assign]
        explicit = cls.__dict__.get("__hash__", MISSING)
        if explicit is MISSING or (explicit is None and "__eq__" in cls.__dict__):
            cls.__hash__ = _hash  # type: ignore[method-assign]
    pending = _Pending(cls)
    for name in pending.names:
        setattr(cls, name, _Deferred(pending, name))
    return cls


_LOCK = threading.RLock()  # a record's first use may come from two threads; a subclass's sets its bases up


class _Pending:
    """What a record sets up on its first use: its dataclass fields (``dataclasses.fields``), the layout its
    shared methods read, and its compiled ``__init__``. Most of the ninety records a command defines it never
    uses, and each would cost about 0.5 ms (issue 29's start-up).

    First use is any read of what it sets up: making an instance, ``dataclasses.fields`` or ``replace``, a
    pickled instance compared, ``Record.__init__`` or ``Record.__doc__`` (as ``inspect.signature`` and
    ``help`` read them), so that whoever looks finds the dataclass as ``@dataclass`` would have made it.
    """

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.documented = bool(cls.__dict__.get("__doc__"))
        own = ("__init__",) if "__init__" in cls.__dict__ else ()  # a class's own __init__ stays, as in a dataclass
        deferred = ("__dataclass_fields__", "__dataclass_params__", "__match_args__", "__record__")
        self.names = deferred + ("__init__",) * (not own) + ("__doc__",) * (not self.documented)
        self.done = False

    def set_up(self) -> None:
        with _LOCK:
            if not self.done:
                self._set_up(self.cls)
                self.done = True

    def _set_up(self, cls: type) -> None:
        for name in self.names:
            if name != "__doc__":  # a class's __doc__ cannot be deleted, only replaced
                delattr(cls, name)
        if not self.documented:  # for now: else dataclass() reads a signature (object's, slowly) to write one
            cls.__doc__ = cls.__name__
        dataclasses.dataclass(cls, init=False, repr=False, eq=False)  # the fields, and nothing compiled
        fields = list(dataclasses.fields(cls))
        shown = tuple(f.name for f in fields if f.repr)
        hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
        compared = _getter([f.name for f in fields if f.compare])
        setattr(cls, "__record__", _Layout(shown, _getter(list(shown)), compared, _getter(hashed)))  # noqa: B010
        if "__init__" in self.names:
            setattr(cls, "__init__", _init(cls, fields))  # noqa: B010
        if not self.documented:  # as a dataclass's: its name and signature
            cls.__doc__ = cls.__name__ + _signature(fields)


class _Deferred:
    """One attribute of a record not yet used: reading it sets the record up, then reads the real one."""

    def __init__(self, pending: _Pending, name: str) -> None:
        self.pending = pending
        self.name = name

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        self.pending.set_up()
        value = self.pending.cls.__dict__[self.name]
        return value.__get__(instance, owner) if instance is not None and hasattr(value, "__get__") else value


class _Layout(NamedTuple):
    """Which fields a record's shared methods read: shown (repr), compared (==) and hashed."""

    shown: tuple[str, ...]
    shown_values: Callable[[Any], tuple[Any, ...]]
    compared: Callable[[Any], tuple[Any, ...]]
    hashed: Callable[[Any], tuple[Any, ...]]


def _getter(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The fields' values as a tuple (attrgetter of one name gives the bare value)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda self: (one(self),)
    return lambda self: ()


def _init(cls: type, fields: list[dataclasses.Field]) -> Callable[..., None]:
    """The one compiled method: assign each field in order, through object.__setattr__ as a frozen
    dataclass's ``__init__`` does, with its default or a fresh value of its default factory."""
    names: dict[str, Any] = {"__set": object.__setattr__, "__factory": _FACTORY}
    params, body = ["self"], []
    for f in fields:
        if not f.init:  # not a parameter: its default, if it has one
            if f.default is not MISSING:
                names[f"__default_{f.name}"] = f.default
                body.append(f"  __set(self, {f.name!r}, __default_{f.name})")
            elif f.default_factory is not MISSING:
                names[f"__make_{f.name}"] = f.default_factory
                body.append(f"  __set(self, {f.name!r}, __make_{f.name}())")
            continue
        if f.default is not MISSING:
            names[f"__default_{f.name}"] = f.default
            params.append(f"{f.name}=__default_{f.name}")
            value = f.name
        elif f.default_factory is not MISSING:
            names[f"__make_{f.name}"] = f.default_factory
            params.append(f"{f.name}=__factory")
            value = f"__make_{f.name}() if {f.name} is __factory else {f.name}"
        else:
            params.append(f.name)
            value = f.name
        body.append(f"  __set(self, {f.name!r}, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("  self.__post_init__()")
    source = f"def __init__({', '.join(params)}):\n" + ("\n".join(body) or "  pass")
    exec(source, names)  # noqa: S102 - the source is made from field names, never from user text
    init = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = {f.name: f.type for f in fields} | {"return": None}
    return init


class _Factory:
    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _signature(fields: list[dataclasses.Field]) -> str:
    """``(name: 'type' = default, ...)``, as ``inspect.signature`` writes a dataclass's, without its cost."""

    def param(f: dataclasses.Field) -> str:
        text = f"{f.name}: {f.type!r}" if isinstance(f.type, str) else f"{f.name}: {_annotation(f.type)}"
        if f.default is not MISSING:
            return f"{text} = {f.default!r}"
        return f"{text} = <factory>" if f.default_factory is not MISSING else text

    return "(" + ", ".join(param(f) for f in fields if f.init) + ")"


def _annotation(kind: Any) -> str:
    import inspect

    return inspect.formatannotation(kind)


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


@reprlib.recursive_repr()
def _repr(self: Any) -> str:
    layout = self.__record__
    shown = ", ".join(f"{name}={value!r}" for name, value in zip(layout.shown, layout.shown_values(self)))
    return f"{self.__class__.__qualname__}({shown})"


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        compared = self.__record__.compared
        return compared(self) == compared(other)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(self.__record__.hashed(self))
