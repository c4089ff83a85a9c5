"""What the safe unpickler does besides running opcodes: the allow-list and its imitations.

`ALLOWED` maps the (module, name) of every global the reader honours to a tag; `imitate` runs
treetool's own code for a tag (it never looks the name up and calls it). Also the helpers of
the opcodes that fill containers, the parsers of protocol 0 text arguments, and `walk_check`,
the one pass over a freshly read tree.
"""

from __future__ import annotations

import codecs
import collections
from typing import Any

import numpy as np

from .._errors import LoadError
from . import _numpy_rebuild as nr
from ._opaque import GlobalRef, Opaque

__all__ = ["ALLOWED", "BUILTIN_TYPES", "MAX_DEPTH", "PendingKey", "imitate", "walk_check"]

#: deepest nesting of containers accepted in a loaded tree
MAX_DEPTH = 1000

_Global = GlobalRef  # a global named by the file, with the tag of its imitation ("" if blocked)

_NP = ("numpy.core.multiarray", "numpy._core.multiarray")
_NUMERIC = ("numpy.core.numeric", "numpy._core.numeric")

# (module, name) -> tag of the imitation treetool runs for it
ALLOWED: dict[tuple[str, str], str] = {
    **{(m, "_reconstruct"): "np_reconstruct" for m in _NP},
    **{(m, "scalar"): "np_scalar" for m in _NP},
    **{(m, "_frombuffer"): "np_frombuffer" for m in _NUMERIC},
    ("numpy", "dtype"): "np_dtype",
    ("numpy", "ndarray"): "np_ndarray",
    ("jax._src.array", "_reconstruct_array"): "jax_array",
    ("jax._src.prng", "PRNGKeyArray"): "prng_key",
    ("jax._src.random.prng", "PRNGKeyArray"): "prng_key",
    ("_codecs", "encode"): "codecs_encode",
    ("collections", "OrderedDict"): "ordereddict",
    ("collections", "defaultdict"): "defaultdict",
    ("copyreg", "_reconstructor"): "reconstructor",
    ("copy_reg", "_reconstructor"): "reconstructor",
}
for _b in ("builtins", "__builtin__"):
    for _n in (
        "set",
        "frozenset",
        "complex",
        "bytearray",
        "bytes",
        "list",
        "dict",
        "tuple",
        "object",
    ):
        ALLOWED[(_b, _n)] = _n
BUILTIN_TYPES = {"list": list, "dict": dict, "set": set, "tuple": tuple, "frozenset": frozenset}


class PendingKey:
    """A typed PRNG key array waiting for its BUILD state."""

    __slots__ = ()


def _short(x: Any) -> str:
    r = repr(x)
    return r if len(r) <= 60 else r[:57] + "..."


_CONTAINERS = frozenset(
    (dict, list, tuple, set, frozenset, collections.OrderedDict, collections.defaultdict)
)
_INNER = _CONTAINERS | {Opaque, GlobalRef}  # what walk_check looks inside (or at)


def walk_check(
    tree: Any, path: str, max_depth: int = MAX_DEPTH, max_visits: int | None = None
) -> list[str]:
    """Check a freshly loaded tree: no cycles, bounded depth and size; return the blocked globals.

    Walks containers iteratively (shared subtrees are visited once per reference, up to
    `max_visits`), and collects the class paths of `Opaque` nodes and of `GlobalRef` leaves
    that were not allow-listed.
    """
    blocked: set[str] = set()
    limit = max_visits if max_visits is not None else 50_000_000
    visits = 0
    on_path: set[int] = set()
    exit_mark = object()
    stack: list[Any] = [(tree, 0)]
    push, pop = stack.append, stack.pop
    ndarray = np.ndarray
    while stack:
        item = pop()
        if item is exit_mark:
            on_path.discard(pop())
            continue
        obj, depth = item
        t = type(obj)
        if t is Opaque:
            if obj.source is None:
                blocked.add(obj.class_path)
            kids: Any = [obj.args, obj.state, obj.listitems, obj.dictitems, obj.kwargs, obj.source]
        elif t is GlobalRef:
            if not obj.tag:
                blocked.add(obj.class_path)
            continue
        elif t in _CONTAINERS:
            kids = obj.values() if isinstance(obj, dict) else obj
        elif t is ndarray:
            kids = obj.reshape(-1).tolist()
        else:
            continue
        oid = id(obj)
        if oid in on_path:
            raise LoadError(f"{path}: cyclic reference: an object contains itself")
        if depth >= max_depth:
            raise LoadError(f"{path}: nested deeper than {max_depth} levels")
        visits += 1
        if visits > limit:
            raise LoadError(
                f"{path}: the tree expands to more than {limit} nodes (shared references)"
            )
        d = depth + 1
        n = len(stack)
        for c in kids:
            tc = type(c)
            if tc in _INNER or (tc is ndarray and c.dtype.hasobject):
                push((c, d))
        if len(stack) > n:  # containers below: on the path until they are done (with only
            # leaves below, a container cannot be on a cycle and needs no coming back)
            stack[n:n] = (oid, exit_mark)
            on_path.add(oid)
    return sorted(blocked)


def _utf8(b: bytes, at: int, fail: Any) -> str:
    try:
        return b.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        raise fail("bad UTF-8 string", at) from None


def _ascii(b: bytes, at: int, fail: Any) -> str:
    try:
        return b.decode("ascii")
    except UnicodeDecodeError:
        raise fail("bad GLOBAL name", at) from None


def _ascii_or_bytes(b: bytes) -> Any:
    try:
        return b.decode("ascii")
    except UnicodeDecodeError:
        return b


def _text_number(op: int, line: bytes, at: int, fail: Any) -> Any:
    try:
        if op == 0x49:
            if line == b"00":
                return False
            if line == b"01":
                return True
            return int(line)
        if op == 0x4C:
            return int(line[:-1] if line.endswith(b"L") else line)
        return float(line)
    except ValueError:
        raise fail(f"bad number {line[:20]!r}", at) from None


def _text_string(line: bytes, at: int, fail: Any) -> Any:
    if len(line) >= 2 and line[0] == line[-1] and line[:1] in (b"'", b'"'):
        try:
            raw = codecs.escape_decode(line[1:-1])[0]
        except ValueError:
            raise fail("bad STRING escape", at) from None
        return _ascii_or_bytes(raw)
    raise fail("STRING is not quoted", at)


def _setitems(target: Any, items: list, at: int, fail: Any) -> None:
    if len(items) % 2:
        raise fail("odd number of items for SETITEMS", at)
    t = type(target)
    if t is dict or t is collections.OrderedDict or t is collections.defaultdict:
        dest = target
    elif t is Opaque:
        dest = target.dictitems
    else:
        raise fail(f"SETITEM on a {t.__name__}", at)
    try:
        for i in range(0, len(items), 2):
            dest[items[i]] = items[i + 1]
    except TypeError:
        raise fail(f"unhashable dict key {_short(items[i])}", at) from None


def _appends(target: Any, items: list, at: int, fail: Any) -> None:
    t = type(target)
    if t is list:
        target.extend(items)
    elif t is Opaque:
        target.listitems.extend(items)
    else:
        raise fail(f"APPEND on a {t.__name__}", at)


def _dynamic_class_path(cls: Opaque) -> str:
    # cloudpickle's class skeletons name the class in their arguments
    if (
        cls.class_path.endswith("_make_skeleton_class")
        and len(cls.args) >= 2
        and isinstance(cls.args[1], str)
    ):
        return f"<dynamic>.{cls.args[1]}"
    return f"{cls.class_path}()"


def _prng_key(state: Any) -> Any:
    """A typed PRNG key array becomes a `KeyArray` (`key<fry>[4]`, its data `uint32[4, 2]`)."""
    if isinstance(state, dict):
        impl = state.get("_impl")
        if type(impl) is Opaque and impl.class_path.endswith("prng.PRNGImpl"):
            key = nr.key_array(state.get("_base_array"), impl.args)
            if key is not None:
                return key
    return Opaque("jax._src.prng.PRNGKeyArray", (), None, state)


def imitate(tag: str, g: _Global, args: tuple, lazy: bool) -> Any:
    n = len(args)
    if tag == "np_reconstruct":
        sub = args[0] if n else None
        if n == 3 and type(sub) is _Global and sub.tag == "np_ndarray":
            return nr.PendingArray()
        return Opaque(_class_of(sub) if type(sub) is _Global else g.class_path, args)
    if tag == "np_dtype":
        return nr.make_dtype(args)
    if tag == "np_scalar":
        return nr.scalar(args)
    if tag == "np_frombuffer":
        return nr.frombuffer(args, lazy)
    if tag == "jax_array":
        if n == 4 and type(args[0]) is _Global and args[0].tag == "np_reconstruct":
            aval = args[3]
            if isinstance(aval, dict) and all(
                isinstance(v, bool | int | str | None) for v in aval.values()
            ):
                return nr.array_from_state(args[2], lazy)
        return Opaque(g.class_path, args)
    if tag == "codecs_encode":
        if (
            n in (1, 2)
            and isinstance(args[0], str)
            and (n == 1 or args[1] in ("latin1", "latin-1"))
        ):
            return args[0].encode("latin1")
        return Opaque(g.class_path, args)
    if tag in ("set", "frozenset", "list", "tuple"):
        if n == 0:
            return BUILTIN_TYPES[tag]()
        if n == 1 and isinstance(args[0], list | tuple | set | frozenset):
            try:
                return BUILTIN_TYPES[tag](args[0])
            except TypeError:
                raise LoadError(f"unhashable item in a {tag}") from None
        return Opaque(g.class_path, args)
    if tag == "dict" or tag == "ordereddict":
        ctor = dict if tag == "dict" else collections.OrderedDict
        if n == 0:
            return ctor()
        if n == 1 and isinstance(args[0], dict):
            return ctor(args[0])
        if (
            n == 1
            and isinstance(args[0], list | tuple)
            and all(isinstance(p, list | tuple) and len(p) == 2 for p in args[0])
        ):
            try:
                return ctor(args[0])
            except TypeError:
                raise LoadError("unhashable dict key") from None
        return Opaque(g.class_path, args)
    if tag == "defaultdict":
        factory = args[0] if n else None
        real = BUILTIN_TYPES.get(factory.tag) if type(factory) is _Global else None
        out = collections.defaultdict(real)
        if n == 2 and isinstance(args[1], dict):
            out.update(args[1])
        return out
    if tag == "complex":
        if n <= 2 and all(type(a) in (int, float) for a in args):
            return complex(*args)
        return Opaque(g.class_path, args)
    if tag in ("bytes", "bytearray"):
        ctor = bytes if tag == "bytes" else bytearray
        if n == 0:
            return ctor()
        if n == 1 and isinstance(args[0], bytes | bytearray):
            return ctor(args[0])
        if (
            n == 1
            and isinstance(args[0], list)
            and all(type(x) is int and 0 <= x < 256 for x in args[0])
        ):
            return ctor(args[0])
        if n == 2 and isinstance(args[0], str) and args[1] in ("latin1", "latin-1"):
            return ctor(args[0].encode("latin1"))
        return Opaque(g.class_path, args)
    if tag == "reconstructor":
        if (
            n == 3
            and type(args[0]) is _Global
            and type(args[1]) is _Global
            and args[1].tag == "object"
        ):
            cls = args[0]
            if cls.tag == "ordereddict":
                return collections.OrderedDict()
            return Opaque(cls.class_path, (), None, None)
        return Opaque(g.class_path, args)
    return Opaque(g.class_path, args)


def _class_of(g: _Global) -> str:
    return g.class_path
