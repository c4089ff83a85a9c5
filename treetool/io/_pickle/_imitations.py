"""Treetool's imitations of the allow-listed reconstructors a pickle may call.

`ALLOWED` (in `_pickle_ops`) gives each allow-listed (module, name) a tag; `IMITATIONS` maps
the tag to the function that imitates the global, and `imitate` looks it up: one table entry
per family of globals, never an if-chain, and never the real global.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from treetool._errors import LoadError
from treetool.io._opaque import GlobalRef, Opaque
from treetool.io._pickle import _numpy_rebuild as nr
from treetool.io._pickle._ops import BUILTIN_TYPES, KeyCheck
from treetool.io._safety._budget import Budget

__all__ = ["IMITATIONS", "imitate"]

_Global = GlobalRef


def _load_error(msg: str, at: int) -> LoadError:
    return LoadError(msg)


def _charge_copy(budget: Budget, x: Any, per_item: int = 8) -> None:
    if isinstance(x, list | tuple | set | frozenset | dict | str | bytes | bytearray):
        budget.charge_alloc(per_item * len(x))


def imitate(tag: str, g: _Global, args: tuple, lazy: bool, keycheck: KeyCheck) -> Any:
    """Run treetool's imitation of the allow-listed global `g` (tagged `tag`) on `args`.

    The imitations are a table, `IMITATIONS`, from the tag `ALLOWED` gives a (module, name)
    to the function that imitates it. What an imitation copies is charged to the budget (an
    argument may be shared through the memo and copied at every reference); what it hashes is
    checked by `keycheck` first. Arguments an imitation does not know make an `Opaque` node.

    Example:
        >>> kc = KeyCheck(Budget("f.pkl", 100))
        >>> imitate("complex", GlobalRef("builtins", "complex", "complex"), (1.0, 2.0), True, kc)
        (1+2j)
    """
    return IMITATIONS.get(tag, _opaque)(g, args, lazy, keycheck)


def _opaque(g: _Global, args: tuple, lazy: bool, keycheck: KeyCheck) -> Any:
    return Opaque(g.class_path, args)


def _np_reconstruct(g: _Global, args: tuple, lazy: bool, keycheck: KeyCheck) -> Any:
    sub = args[0] if args else None
    if len(args) == 3 and type(sub) is _Global and sub.tag == "np_ndarray":
        return nr.PendingArray()
    return Opaque(_class_of(sub) if type(sub) is _Global else g.class_path, args)


def _np_dtype(g: _Global, args: tuple, lazy: bool, keycheck: KeyCheck) -> Any:
    return nr.make_dtype(args)


def _np_scalar(g: _Global, args: tuple, lazy: bool, keycheck: KeyCheck) -> Any:
    return nr.scalar(args)


def _np_frombuffer(g: _Global, args: tuple, lazy: bool, keycheck: KeyCheck) -> Any:
    return nr.frombuffer(args, lazy, keycheck.budget)


def _jax_array(g: _Global, args: tuple, lazy: bool, keycheck: KeyCheck) -> Any:
    if len(args) == 4 and type(args[0]) is _Global and args[0].tag == "np_reconstruct":
        aval = args[3]
        if isinstance(aval, dict) and all(
            isinstance(v, bool | int | str | None) for v in aval.values()
        ):
            return nr.array_from_state(args[2], lazy, keycheck.budget)
    return Opaque(g.class_path, args)


def _codecs_encode(g: _Global, args: tuple, lazy: bool, keycheck: KeyCheck) -> Any:
    n = len(args)
    if n in (1, 2) and isinstance(args[0], str) and (n == 1 or args[1] in ("latin1", "latin-1")):
        keycheck.budget.charge_alloc(len(args[0]))
        return _encode_latin1(args[0])
    return Opaque(g.class_path, args)


def _sequence(g: _Global, args: tuple, lazy: bool, keycheck: KeyCheck) -> Any:
    # set, frozenset, list, tuple
    tag = g.tag
    if not args:
        return BUILTIN_TYPES[tag]()
    if len(args) == 1 and isinstance(args[0], list | tuple | set | frozenset):
        hashed = tag in ("set", "frozenset")
        _charge_copy(keycheck.budget, args[0], 32 if hashed else 8)
        if hashed:
            keycheck.keys(args[0], 0, _load_error)
        try:
            return BUILTIN_TYPES[tag](args[0])
        except TypeError:
            raise LoadError(f"unhashable item in a {tag}") from None
    return Opaque(g.class_path, args)


def _mapping(g: _Global, args: tuple, lazy: bool, keycheck: KeyCheck) -> Any:
    # dict, OrderedDict
    ordered = g.tag == "ordereddict"
    ctor = collections.OrderedDict if ordered else dict
    budget = keycheck.budget
    if not args:
        return ctor()
    if len(args) == 1 and isinstance(args[0], dict):
        _charge_copy(budget, args[0], 64)
        if ordered:  # rehashes every key
            keycheck.keys(args[0], 0, _load_error)
        return ctor(args[0])
    if (
        len(args) == 1
        and isinstance(args[0], list | tuple)
        and all(isinstance(p, list | tuple) and len(p) == 2 for p in args[0])
    ):
        _charge_copy(budget, args[0], 64)
        keycheck.keys([p[0] for p in args[0]], 0, _load_error)
        try:
            return ctor(args[0])
        except TypeError:
            raise LoadError("unhashable dict key") from None
    return Opaque(g.class_path, args)


def _defaultdict(g: _Global, args: tuple, lazy: bool, keycheck: KeyCheck) -> Any:
    factory = args[0] if args else None
    real = BUILTIN_TYPES.get(factory.tag) if type(factory) is _Global else None
    out: collections.defaultdict = collections.defaultdict(real)
    if len(args) == 2 and isinstance(args[1], dict):
        _charge_copy(keycheck.budget, args[1], 64)
        out.update(args[1])
    return out


def _complex(g: _Global, args: tuple, lazy: bool, keycheck: KeyCheck) -> Any:
    if len(args) <= 2 and all(type(a) in (int, float) for a in args):
        try:
            return complex(*args)
        except OverflowError:
            raise LoadError("complex() argument out of range") from None
    return Opaque(g.class_path, args)


def _bytes(g: _Global, args: tuple, lazy: bool, keycheck: KeyCheck) -> Any:
    # bytes, bytearray
    ctor: type = bytes if g.tag == "bytes" else bytearray
    n = len(args)
    budget = keycheck.budget
    if n == 0:
        return ctor()
    if n == 1 and isinstance(args[0], bytes | bytearray):
        _charge_copy(budget, args[0], 1)
        return ctor(args[0])
    if (
        n == 1
        and isinstance(args[0], list)
        and all(type(x) is int and 0 <= x < 256 for x in args[0])
    ):
        _charge_copy(budget, args[0], 1)
        return ctor(args[0])
    if n == 2 and isinstance(args[0], str) and args[1] in ("latin1", "latin-1"):
        _charge_copy(budget, args[0], 1)
        return ctor(_encode_latin1(args[0]))
    return Opaque(g.class_path, args)


def _reconstructor(g: _Global, args: tuple, lazy: bool, keycheck: KeyCheck) -> Any:
    if (
        len(args) == 3
        and type(args[0]) is _Global
        and type(args[1]) is _Global
        and args[1].tag == "object"
    ):
        cls = args[0]
        if cls.tag == "ordereddict":
            return collections.OrderedDict()
        return Opaque(cls.class_path, (), None, None)
    return Opaque(g.class_path, args)


_Imitation = Callable[[_Global, tuple, bool, KeyCheck], Any]

#: the tag `ALLOWED` gives an allow-listed (module, name) -> the function that imitates it;
#: a tag without an entry ("object", "prng_key" called, "np_ndarray" called) makes an Opaque
IMITATIONS: dict[str, _Imitation] = {
    "np_reconstruct": _np_reconstruct,
    "np_dtype": _np_dtype,
    "np_scalar": _np_scalar,
    "np_frombuffer": _np_frombuffer,
    "jax_array": _jax_array,
    "codecs_encode": _codecs_encode,
    "set": _sequence,
    "frozenset": _sequence,
    "list": _sequence,
    "tuple": _sequence,
    "dict": _mapping,
    "ordereddict": _mapping,
    "defaultdict": _defaultdict,
    "complex": _complex,
    "bytes": _bytes,
    "bytearray": _bytes,
    "reconstructor": _reconstructor,
}


def _encode_latin1(s: str) -> bytes:
    try:
        return s.encode("latin1")
    except UnicodeEncodeError:
        raise LoadError("text to encode as latin-1 has characters beyond latin-1") from None


def _class_of(g: _Global) -> str:
    return g.class_path
