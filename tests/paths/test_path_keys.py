"""Path key entries are values: frozen, hashable, equal by value and exact type, picklable."""

from __future__ import annotations

import copy
import pickle

import jax
import pytest

from treetool import Path
from treetool._paths._keys import (
    AnyIndex,
    AnyKey,
    DeepWildcard,
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    Key,
    NameGlob,
    RawKey,
    SequenceKey,
)

# two equal-but-distinct makers of every key kind, and one different value of the same kind
KINDS = [
    (lambda: DictKey("w"), lambda: DictKey("b")),
    (lambda: DictKey(0), lambda: DictKey(1)),
    (lambda: SequenceKey(3), lambda: SequenceKey(4)),
    (lambda: GetAttrKey("weight"), lambda: GetAttrKey("bias")),
    (lambda: FlattenedIndexKey(2), lambda: FlattenedIndexKey(5)),
    (lambda: RawKey("<k>"), lambda: RawKey("<j>")),
    (lambda: NameGlob("lin*"), lambda: NameGlob("conv*")),
    (AnyKey, DeepWildcard),
    (AnyIndex, AnyKey),
]


@pytest.mark.parametrize(("make", "make_other"), KINDS)
def test_keys_are_frozen_values_equal_and_hashed_by_value(make, make_other):
    a, b, c = make(), make(), make_other()
    assert a is not b and a == b and hash(a) == hash(b)
    assert a != c
    assert len({a, b, c}) == 2
    assert {a: 1}[b] == 1
    assert not hasattr(a, "__dict__")  # slotted: no stray attributes either
    # the fields (`__match_args__`, as a dataclass would have them) are all there, and frozen
    assert all(hasattr(a, name) for name in type(a).__match_args__)
    for name in (*type(a).__match_args__, *type(a).__slots__):
        before = getattr(a, name)
        with pytest.raises(AttributeError, match="frozen"):
            setattr(a, name, 0)
        with pytest.raises(AttributeError, match="frozen"):
            delattr(a, name)
        assert getattr(a, name) is before
    with pytest.raises(AttributeError, match="frozen"):  # a name that is not a field
        a.extra = 1  # type: ignore[attr-defined]
    assert a == make()  # unchanged by the refused writes
    assert pickle.loads(pickle.dumps(a)) == a
    assert copy.deepcopy(a) == a and copy.copy(a) == a


def test_equality_is_by_exact_type_not_by_field_tuple():
    # a bool, an int and a float key are three different dict entries, as in a dict
    assert DictKey(1) != DictKey(True) and DictKey(1) != DictKey(1.0)
    assert len({DictKey(1), DictKey(True), DictKey(1.0)}) == 3
    # kinds never compare equal across, even when their field values coincide
    assert DictKey(0) != SequenceKey(0) != FlattenedIndexKey(0)
    assert FlattenedIndexKey(0) != DictKey(0)
    assert GetAttrKey("w") != DictKey("w") and AnyKey() != AnyIndex() != DeepWildcard()
    # and a jax key entry is not a treetool key, while converting gives an equal one
    assert SequenceKey(0) != jax.tree_util.SequenceKey(0)
    assert Path.from_jax((jax.tree_util.SequenceKey(0),))[0] == SequenceKey(0)


def test_keys_are_key_subclasses_with_reprs_that_rebuild_them():
    keys = [DictKey("a"), DictKey(0), SequenceKey(1), GetAttrKey("w"), FlattenedIndexKey(2)]
    for k in keys:
        assert isinstance(k, Key)
        assert eval(repr(k)) == k
    assert [repr(k) for k in (AnyKey(), AnyIndex(), DeepWildcard(), NameGlob("l*"))] == [
        "AnyKey()",
        "AnyIndex()",
        "DeepWildcard()",
        "NameGlob('l*')",
    ]


def test_name_glob_regex_is_derived_not_compared():
    g = NameGlob("lin*")
    assert g.matches(GetAttrKey("linear")) and g.matches(DictKey("lin1"))
    assert not g.matches(GetAttrKey("conv"))
    assert pickle.loads(pickle.dumps(g)).matches(GetAttrKey("linear"))
    with pytest.raises(TypeError):
        NameGlob("a", "b")  # type: ignore[call-arg]  # the compiled pattern is not an argument


def test_paths_of_keys_are_usable_as_dict_keys():
    p = Path((GetAttrKey("layers"), SequenceKey(0), DictKey("w")))
    q = Path.parse(".layers[0]['w']")
    assert p == q and {p: "x"}[q] == "x"
    assert p.keys == q.keys and hash(p.keys) == hash(q.keys)
