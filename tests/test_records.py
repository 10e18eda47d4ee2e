"""`@record` (symattn/input/records.py) behaves as `@dataclass(frozen=True)`: each check holds a record
beside the same class made by dataclasses."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import FrozenInstanceError, dataclass, field

import pytest

from symattn.input.records import record


@record
class Stamp:
    at: int
    by: str = ""


def pair(eq: bool = True):
    """The same class twice: a frozen dataclass and a record."""

    def body():
        class Point:
            x: int
            y: tuple[int, ...] = ()
            tags: list[str] = field(default_factory=list, hash=False)  # compared, not hashed
            note: str = field(default="", compare=False, repr=False)

        return Point

    return dataclass(frozen=True, eq=eq)(body()), record(eq=eq)(body())


def test_repr_equality_and_hash_are_the_dataclasses():
    made, ours = pair()
    a, b = made(1, (2, 3), note="n"), ours(1, (2, 3), note="n")
    assert repr(b) == repr(a) == "pair.<locals>.body.<locals>.Point(x=1, y=(2, 3), tags=[])"
    assert ours(1, (2,), note="a") == ours(1, (2,), note="b")  # note is not compared
    assert ours(1) != ours(2)
    assert ours(1) != made(1) and (ours(1) == 1) is False  # another class is never equal
    assert ours(1, (), ["t"]) != ours(1, (), ["u"])
    assert hash(ours(1, (2,), ["t"])) == hash(made(1, (2,), ["u"])) == hash((1, (2,)))


def test_a_record_is_frozen_with_the_dataclasses_messages():
    made, ours = pair()
    for point in (made(1), ours(1)):
        with pytest.raises(FrozenInstanceError, match="^cannot assign to field 'x'$"):
            point.x = 2
        with pytest.raises(FrozenInstanceError, match="^cannot delete field 'y'$"):
            del point.y
    with pytest.raises(TypeError, match="^Cannot overwrite attribute __setattr__ in class Loose$"):

        @record
        class Loose:
            x: int

            def __setattr__(self, name, value):
                object.__setattr__(self, name, value)


def test_defaults_factories_and_the_dataclass_helpers():
    made, ours = pair()
    first, second = ours(1), ours(1)
    assert first.tags == [] and first.tags is not second.tags  # a fresh list each
    assert [f.name for f in dataclasses.fields(ours)] == ["x", "y", "tags", "note"]
    assert dataclasses.replace(ours(1, (2,)), x=5) == ours(5, (2,))
    assert dataclasses.asdict(ours(1, note="n")) == {"x": 1, "y": (), "tags": [], "note": "n"}
    assert pickle.loads(pickle.dumps(Stamp(1, "a"))) == Stamp(1, "a")  # a process pool sends records
    assert ours.__match_args__ == made.__match_args__ == ("x", "y", "tags", "note")
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'x'"):
        ours()


def test_the_signature_and_the_docstring_are_the_dataclasses():
    import inspect

    made, ours = pair()
    assert str(inspect.signature(ours)) == str(inspect.signature(made))
    assert (
        ours.__doc__
        == made.__doc__
        == "Point(x: 'int', y: 'tuple[int, ...]' = (), tags: 'list[str]' = <factory>, note: 'str' = '')"
    )
    assert ours.__init__.__qualname__ == "pair.<locals>.body.<locals>.Point.__init__"


def test_eq_false_compares_by_identity():
    made, ours = pair(eq=False)
    one = ours(1)
    assert one == one and ours(1) != ours(1)
    assert hash(one) == object.__hash__(one)
    assert repr(one) == repr(made(1)) == "pair.<locals>.body.<locals>.Point(x=1, y=(), tags=[])"


def test_a_record_may_extend_a_record_and_keep_its_own_methods():
    @record
    class Base:
        x: int

        def __repr__(self) -> str:
            return f"<{self.x}>"

    @record
    class Child(Base):
        y: int = 0

    assert Child(1, 2) == Child(1, 2) and Child(1, 2) != Child(1, 3)
    assert (
        repr(Base(1)) == "<1>"
        and repr(Child(1, 2)) == "test_a_record_may_extend_a_record_and_keep_its_own_methods.<locals>.Child(x=1, y=2)"
    )
    assert hash(Child(1, 2)) == hash((1, 2))


def test_a_recursive_record_repr_stops_as_a_dataclasses():
    @record
    class Box:
        items: list

    box = Box([])
    box.items.append(box)
    assert repr(box) == "test_a_recursive_record_repr_stops_as_a_dataclasses.<locals>.Box(items=[...])"


def test_a_record_is_set_up_when_it_is_first_used():
    import types

    @record
    class Late:
        x: int
        y: int = 2

    class Plain(Late):  # not a record of its own: making it sets Late up
        pass

    assert not isinstance(Late.__dict__["__init__"], types.FunctionType)
    assert "__dataclass_fields__" in Late.__dict__ and not isinstance(Late.__dict__["__dataclass_fields__"], dict)
    assert Plain(1).y == 2 and repr(Plain(1, 3)).endswith("Plain(x=1, y=3)")  # as a dataclass: the class made
    assert isinstance(Late.__dict__["__init__"], types.FunctionType)
    assert "__init__" not in Plain.__dict__

    @record
    class Read:
        x: int

    assert Read.__init__.__qualname__.endswith("Read.__init__")  # reading it sets it up
    assert isinstance(Read.__dict__["__init__"], types.FunctionType)

    @record
    class Fields:
        x: int

    assert [f.name for f in dataclasses.fields(Fields)] == ["x"] and dataclasses.is_dataclass(Fields)

    @record
    class Documented:
        x: tuple[int, ...] = ()

    assert Documented.__doc__ == "Documented(x: 'tuple[int, ...]' = ())"
    assert Documented.__match_args__ == ("x",) and Documented().x == ()

    @record
    class Base:
        x: int

    @record
    class Child(Base):  # setting the child up sets its base up first
        y: int

    assert [f.name for f in dataclasses.fields(Child)] == ["x", "y"] and Child(1, 2) == Child(1, 2)
    assert isinstance(Base.__dict__["__dataclass_fields__"], dict)


def test_post_init_and_an_own_init_are_kept_as_a_dataclass_keeps_them():
    seen = []

    @record
    class Checked:
        x: int

        def __post_init__(self) -> None:
            seen.append(self.x)

    @record
    class Own:
        x: int

        def __init__(self, text: str) -> None:
            object.__setattr__(self, "x", int(text))

    assert Checked(4).x == 4 and seen == [4]
    assert Own("5") == Own("5") and Own("5").x == 5


def test_a_record_unpickled_where_it_was_never_made_compares_and_shows(tmp_path):
    # a worker process (dask, a spawned pool) gets records by pickle: none made there, nothing set up
    import os
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "made.py").write_text(
        "from symattn.input.records import record\n\n\n@record\nclass Point:\n    x: int\n    y: tuple = ()\n",
        encoding="utf-8",
    )
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(root)]))
    make = "import pickle, sys; from made import Point; sys.stdout.buffer.write(pickle.dumps([Point(1, (2,)), Point(1, (2,))]))"
    data = subprocess.run([sys.executable, "-c", make], env=env, capture_output=True, check=True).stdout
    read = (
        "import pickle, sys; a, b = pickle.loads(sys.stdin.buffer.read()); "
        "print(a == b, hash(a) == hash((1, (2,))), repr(a))"
    )
    said = subprocess.run([sys.executable, "-c", read], env=env, input=data, capture_output=True, check=True)
    assert said.stdout.decode() == "True True Point(x=1, y=(2,))\n"
