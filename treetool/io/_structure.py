"""The structure record `tt.save` writes beside the tensors, and the rebuild from it.

A safetensors or npz file holds flat, named tensors (`layers.0.bias`: the names other libraries
show). `tt.save` adds one JSON record of the tree's structure (in the safetensors
`__metadata__`, in an npz member) from which `load` rebuilds the nested tree on top of those
names, with jax's own paths (`.layers[0].bias`), with no `like=` skeleton. The record never
holds code: a class is its import name, rebuilt as an inert `Opaque` node (as the safe
unpickler does; classes of well-known libraries open by their fields, as jax opens them), a
function leaf (an equinox MLP's `activation`) is its import name, rebuilt as an
`OpaqueFunction` leaf.

One node is one JSON list, its children inline (one level of JSON per level of the tree):

- `["a", name]` an array leaf: the tensor `name` (`["a", name, "int"]`: a Python scalar
  stored as a 0-d tensor, which `tt.save` does not write but reads);
- Python scalars by value: `["b", bool]`, `["i", text]` an int, `["r", repr]` a float,
  `["c", re, im]` a complex; `["s", text]` a str, `["n"]` None, `["f", module, qualname, kind, code]` a function, `["g", module, qualname]` a
  class;
- `["d", cls, key, child, ...]` a dict (`cls`: "dict", "collections.OrderedDict",
  "collections.defaultdict"); `["l", child, ...]` a list, `["t", child, ...]` a tuple;
- `["o", class_path, statics, kind, key, child, ...]` any other node (an equinox module, a
  namedtuple, a flax `FrozenDict`): each child's key kind (`a` attribute, `k` dict key, `i`
  index) and key; `statics` the dataclass fields jax keeps out of the children, when they
  are plain values.

The whole record is `{"version": 1, "tree": node}`.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
from typing import Any, cast

from treetool._errors import LoadError, SaveError
from treetool._leaves._callables import OpaqueFunction, callable_identity
from treetool._paths._path import DictKey, GetAttrKey, Key, Path, SequenceKey
from treetool._typetests import is_shape_struct
from treetool.io._safety._limits import MAX_DEPTH, check_json_text

__all__ = ["RECORD_KEY", "fit_like", "rebuild", "record", "summary"]

#: the safetensors `__metadata__` key (and npz member name) of the record
RECORD_KEY = "treetool_tree"
_VERSION = 1
_DICTS: dict[type, str] = {dict: "dict", collections.OrderedDict: "collections.OrderedDict"}
_INT64 = (-(1 << 63), (1 << 63) - 1)
_STATIC_TYPES = (bool, int, float, str, type(None))


def _class_path(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


class _Recorder:
    def __init__(self, where: str, names: dict[str, Any]) -> None:
        self.where = where
        self.names = names  # keystr -> (path, leaf), in tree order: the tensors to write
        from treetool._leaves._facts import is_array, is_key
        from treetool._tree._model import children

        self.is_array, self.is_key, self.children = is_array, is_key, children

    def node(self, x: Any, keys: tuple[Key, ...], depth: int) -> list:
        is_array, is_key, children = self.is_array, self.is_key, self.children
        if depth > MAX_DEPTH:
            raise SaveError(f"{self.where}: the tree is nested deeper than {MAX_DEPTH} levels")
        p = Path._make(keys)
        kind, kids = children(x)
        if kind == "leaf":
            if is_key(x):
                from treetool._leaves._facts import leaf_info

                raise SaveError(
                    f"{self.where}: {p} is a typed PRNG key array ({leaf_info(x).label}); save "
                    "its key data (jax.random.key_data) or use format='pickle'"
                )
            if is_array(x):
                self.names[str(p)] = (p, x)
                return ["a", str(p)]
            return self.scalar(x, p)
        if kind == "none":
            return ["n"]
        kid = [self.node(c, (*keys, k), depth + 1) for k, c in kids]
        t = type(x)
        if kind == "dict" and t in _DICTS | {collections.defaultdict: ""}:
            cls = _DICTS.get(t, "collections.defaultdict")
            out: list = ["d", cls]
            for (k, _), c in zip(kids, kid):
                out += [_json_key(self.where, p, cast(DictKey, k).key), c]
            return out
        if kind == "list" and t is list:
            return ["l", *kid]
        if kind == "tuple" and t is tuple:
            return ["t", *kid]
        from treetool.io._opaque import Opaque

        if isinstance(x, Opaque):  # a placeholder read from a file: recorded as its class
            out = ["o", x.class_path, _plain(x.fields, kids)]
        else:
            out = ["o", _class_path(t), _statics(x, kids)]
        for (k, _), c in zip(kids, kid):
            if type(k) is GetAttrKey:
                out += ["a", k.name, c]
            elif type(k) is DictKey:
                out += ["k", _json_key(self.where, p, k.key), c]
            else:
                out += ["i", int(getattr(k, "idx", getattr(k, "key", 0))), c]
        return out

    def scalar(self, x: Any, p: Path) -> list:
        t = type(x)
        if t is bool:
            return ["b", x]
        if t is int:
            return ["i", str(x)]
        if t is float:
            return ["r", repr(x)]
        if t is complex:
            return ["c", repr(x.real), repr(x.imag)]
        if t is str:
            return ["s", x]
        from treetool.io._opaque import GlobalRef

        if isinstance(x, GlobalRef):
            return ["g", x.module, x.name]
        if isinstance(x, OpaqueFunction):
            return ["f", x.module, x.qualname, x.kind, x.code]
        if isinstance(x, type):
            return ["g", x.__module__, x.__qualname__]
        ident = callable_identity(x)
        if ident is not None:
            module, qualname, code, _ = ident
            return ["f", module, qualname, _function_kind(x), code]
        raise SaveError(
            f"{self.where}: {p or 'the tree'} is a {t.__name__}; tt.save writes arrays and "
            "records numbers, strings, None, functions and classes (replace it with tt.tree_at)"
        )


def _function_kind(x: Any) -> str:
    name = type(x).__name__
    return name if name in ("custom_jvp", "custom_vjp", "PjitFunction", "partial") else "function"


def _json_key(where: str, p: Path, k: Any) -> Any:
    if type(k) is str or type(k) is bool or (type(k) is int and _INT64[0] <= k <= _INT64[1]):
        return k
    raise SaveError(
        f"{where}: {p or 'the tree'} has the key {k!r:.80} ({type(k).__name__}); tt.save "
        "records str and int keys"
    )


def _statics(x: Any, kids: list) -> dict[str, Any]:
    """A dataclass node's fields that are not children (equinox static fields), when plain."""
    if not dataclasses.is_dataclass(x) or isinstance(x, type):
        return {}
    return _plain({f.name: getattr(x, f.name, None) for f in dataclasses.fields(x)}, kids)


def _plain(fields: dict, kids: list) -> dict[str, Any]:
    """The fields that are not children, those with plain values (JSON-able)."""
    child = {k.name for k, _ in kids if type(k) is GetAttrKey}
    out: dict[str, Any] = {}
    for name, v in fields.items():
        if type(name) is not str or name in child:
            continue
        if type(v) in _STATIC_TYPES and not (type(v) is float and not math.isfinite(v)):
            out[name] = v
        elif type(v) is tuple and all(type(e) in (int, str, bool) for e in v):
            out[name] = list(v)  # a tuple of ints (a conv's kernel size) as a list
    return out


def record(tree: Any, where: str) -> tuple[list[tuple[Path, Any]], list]:
    """`([(path, leaf)], node)`: the leaves to write as tensors, in tree order, and the record
    of the tree naming them by keystr (`rename` gives them the names written); `SaveError`,
    one line naming the path, for what cannot be recorded."""
    names: dict[str, tuple[Path, Any]] = {}
    # a RecursionError goes to the caller: `tt.save` writes a too-deep tree of arrays by paths
    node = _Recorder(where, names).node(tree, (), 0)
    return list(names.values()), node


def rename(node: Any, names: dict[str, str]) -> Any:
    """The record with its tensor names (keystrs) replaced by the names written."""
    if type(node) is not list or not node:
        return node
    if node[0] == "a":
        return ["a", names[node[1]], *node[2:]]
    if node[0] in ("d", "l", "t", "o"):
        return [rename(c, names) if type(c) is list else c for c in node]
    return node


# --- reading --------------------------------------------------------------------------------


def parse(where: str, text: str | bytes) -> Any:
    """The record's tree node from its JSON text; `LoadError` (one line) when it is not one."""
    raw = text.encode() if isinstance(text, str) else bytes(text)
    check_json_text(raw, f"{where}: treetool structure record", max_depth=MAX_DEPTH + 4)
    try:
        rec = json.loads(raw)
    except (ValueError, RecursionError):
        raise LoadError(f"{where}: the treetool structure record is not valid JSON") from None
    if not isinstance(rec, dict) or rec.get("version") != _VERSION or "tree" not in rec:
        raise LoadError(f"{where}: the treetool structure record has no version-1 tree")
    return rec["tree"]


def summary(node: Any, text: str) -> str:
    """What `inspect` shows for the record: its size and what it holds, not its JSON.

    Example:
        >>> summary(["l", ["a", "0"], ["n"]], "x" * 40)
        'treetool structure record: 3 nodes, 40 bytes'
    """
    n = 0
    stack = [node]
    while stack:
        x = stack.pop()
        if type(x) is list:
            n += 1
            if x and x[0] in ("d", "l", "t", "o"):
                stack.extend(c for c in x if type(c) is list)
    return f"treetool structure record: {n} nodes, {len(text)} bytes"


class _Bad(Exception):
    pass


def rebuild(where: str, node: Any, tensors: dict[str, Any]) -> Any:
    """The tree the record describes, its array leaves taken from `tensors` by name (each
    used once; all used). No code runs: classes are `Opaque` nodes, functions
    `OpaqueFunction` leaves."""
    used: set[str] = set()
    try:
        tree = _build(node, tensors, used, 0)
    except _Bad as e:
        raise LoadError(f"{where}: the treetool structure record is damaged: {e}") from None
    except RecursionError:
        raise LoadError(f"{where}: the treetool structure record is nested too deeply") from None
    if len(used) != len(tensors):
        extra = sorted(set(tensors) - used)
        raise LoadError(
            f"{where}: the treetool structure record does not name the tensors {_few(extra)}"
        )
    return tree


def _few(items: list[str], n: int = 3) -> str:
    shown = ", ".join(repr(s[:120]) for s in items[:n])
    return shown + (f" (+{len(items) - n} more)" if len(items) > n else "")


def _build(x: Any, tensors: dict[str, Any], used: set[str], depth: int) -> Any:
    if type(x) is not list or not x or type(x[0]) is not str:
        raise _Bad("a node is not a tagged list")
    if depth > MAX_DEPTH:
        raise _Bad(f"nested deeper than {MAX_DEPTH} levels")
    tag = x[0]
    if tag == "a":
        name = x[1] if len(x) > 1 else None
        if type(name) is not str or name not in tensors:
            raise _Bad(f"it names a tensor the file lacks ({str(name)[:120]!r})")
        if name in used:
            raise _Bad(f"it names the tensor {name[:120]!r} twice")
        used.add(name)
        leaf = tensors[name]
        if len(x) == 2:
            return leaf
        return _python_scalar(x[2], leaf)
    if tag == "n":
        return None
    if tag == "s" and len(x) == 2 and type(x[1]) is str:
        return x[1]
    if tag == "b" and len(x) == 2 and type(x[1]) is bool:
        return x[1]
    if tag == "r" and len(x) == 2 and type(x[1]) is str and len(x[1]) <= 40:
        try:
            return float(x[1])
        except ValueError:
            raise _Bad("a float is not a float") from None
    if tag == "i" and len(x) == 2 and type(x[1]) is str and len(x[1]) <= 4000:
        try:
            return int(x[1])
        except ValueError:
            raise _Bad("a big int is not an int") from None
    if tag == "c" and len(x) == 3:
        try:
            return complex(float(x[1]), float(x[2]))
        except (TypeError, ValueError):
            raise _Bad("a complex is not two floats") from None
    if tag == "f" and len(x) == 5:
        module, qualname, kind, code = x[1:]
        if not (module is None or type(module) is str) or type(qualname) is not str:
            raise _Bad("a function's name is not text")
        return OpaqueFunction(module, qualname, str(kind), code if type(code) is str else None)
    if tag == "g" and len(x) == 3 and type(x[1]) is str and type(x[2]) is str:
        from treetool.io._opaque import GlobalRef

        return GlobalRef(x[1], x[2])
    if tag == "l":
        return [_build(c, tensors, used, depth + 1) for c in x[1:]]
    if tag == "t":
        return tuple(_build(c, tensors, used, depth + 1) for c in x[1:])
    if tag == "d" and len(x) % 2 == 0:
        cls = {"dict": dict, "collections.OrderedDict": collections.OrderedDict}.get(x[1])
        d: Any = collections.defaultdict(None) if x[1] == "collections.defaultdict" else None
        if d is None:
            if cls is None:
                raise _Bad(f"an unknown dict type {str(x[1])[:80]!r}")
            d = cls()
        for i in range(2, len(x), 2):
            d[_key(x[i])] = _build(x[i + 1], tensors, used, depth + 1)
        return d
    if tag == "o" and len(x) >= 3 and (len(x) - 3) % 3 == 0 and type(x[1]) is str:
        statics = x[2] if type(x[2]) is dict else {}
        keys: list[tuple[str, Any]] = []
        kids: list[Any] = []
        for i in range(3, len(x), 3):
            kk, k = x[i], x[i + 1]
            if kk not in ("a", "k", "i") or (kk == "a" and type(k) is not str):
                raise _Bad("a child's key is not an attribute, a dict key or an index")
            keys.append((kk, _key(k) if kk == "k" else k))
            kids.append(_build(x[i + 2], tensors, used, depth + 1))
        return _opaque(x[1], statics, keys, kids)
    raise _Bad(f"an unknown node {tag[:20]!r}")


def _key(k: Any) -> Any:
    if type(k) in (str, int, bool):
        return k
    raise _Bad("a dict key is not a str or an int")


def _python_scalar(kind: Any, leaf: Any) -> Any:
    import numpy as np

    t = {"bool": bool, "int": int, "float": float}.get(kind)
    if t is None or getattr(leaf, "shape", None) != ():
        raise _Bad("a Python scalar is not a 0-d tensor")
    return t(np.asarray(leaf).item())


def _opaque(class_path: str, statics: dict, keys: list[tuple[str, Any]], kids: list) -> Any:
    """An `Opaque` of `class_path` whose children are exactly `keys` (in order): the first of
    the ways an `Opaque` can hold them whose layout gives those keys."""
    from treetool.io._opaque import Opaque, opaque_children

    want = [_want(kk, k) for kk, k in keys]
    attrs = {k: c for (kk, k), c in zip(keys, kids) if kk == "a"}
    items = {k: c for (kk, k), c in zip(keys, kids) if kk == "k"}
    plain = {k: v for k, v in statics.items() if type(k) is str and k not in attrs}
    candidates = []
    if len(attrs) == len(keys):
        candidates += [lambda: Opaque(class_path, state={**attrs, **plain})]
        candidates += [lambda: Opaque(class_path, state=dict(attrs))]
        candidates += [lambda: Opaque(class_path, args=tuple(kids))]  # a known NamedTuple
    if len(items) == len(keys):
        candidates += [lambda: Opaque(class_path, args=(dict(items),))]  # a known Mapping
        candidates += [lambda: _with_items(Opaque(class_path), items)]
    candidates += [lambda: Opaque(class_path, args=tuple(kids))]
    for make in candidates:
        o = make()
        if [str(k) for k, _ in opaque_children(o)] == want:
            return o
    raise _Bad(f"the children of {class_path[:120]!r} cannot be laid out as recorded")


def _want(kk: str, k: Any) -> str:
    if kk == "a":
        return str(GetAttrKey(k))
    if kk == "k":
        return str(DictKey(k))
    return str(SequenceKey(int(k)))


def _with_items(o: Any, items: dict) -> Any:
    o.dictitems = dict(items)
    return o


# --- like= ----------------------------------------------------------------------------------


def fit_like(where: str, like: Any, tree: Any, names: dict[str, Any] | None = None) -> Any:
    """`tree` (a loaded file) in `like`'s structure: each array or scalar leaf of `like` takes
    the file's leaf at its path (keystr, or the dotted name other libraries write, from
    `names`); `like`'s other leaves (functions, strings) stay. Any mismatch (a leaf of `like`
    the file lacks, a tensor `like` has no place for, another shape) is one `LoadError`
    naming the paths."""
    import jax
    import numpy as np

    from treetool._leaves._facts import is_array
    from treetool._tree._views import leaves_with_path

    have: dict[str, Any] = {}
    for p, leaf in leaves_with_path(tree):
        if is_array(leaf) or type(leaf) in (bool, int, float, complex):
            have[str(p)] = leaf
    by_name = {k: v for k, v in (names or {}).items() if is_array(v)}
    flat, treedef = jax.tree_util.tree_flatten_with_path(like)
    paths = [Path.from_jax(p) for p, _ in flat]
    dotted = dotted_names(paths)
    used: set[str] = set()
    used_names: set[str] = set()
    out: list[Any] = []
    missing: list[str] = []
    shapes: list[str] = []
    for p, dot, (_, leaf) in zip(paths, dotted, flat):
        scalar = type(leaf) in (bool, int, float, complex)
        if not (scalar or is_array(leaf) or is_shape_struct(leaf)):
            out.append(leaf)
            continue
        key = str(p)
        if key in have:
            got = have[key]
            used.add(key)
        elif dot in by_name and key not in have:
            got = by_name[dot]
            used_names.add(dot)
        else:
            missing.append(key or "<root>")
            out.append(leaf)
            continue
        if scalar:
            try:
                got = type(leaf)(np.asarray(got).item()) if is_array(got) else type(leaf)(got)
            except (TypeError, ValueError):
                shapes.append(
                    f"{key} (the file has {type(got).__name__}, like a {type(leaf).__name__})"
                )
        else:
            fs, ls = tuple(getattr(got, "shape", ())), tuple(getattr(leaf, "shape", ()))
            if fs != ls:
                shapes.append(f"{key} (the file {list(fs)}, like {list(ls)})")
        out.append(got)
    taken = {id(by_name[n]) for n in used_names}
    extra = [k for k in have if k not in used and id(have[k]) not in taken]
    if missing or extra or shapes:
        parts = []
        if missing:
            parts.append(f"missing in the file: {_few_paths(missing)}")
        if extra:
            parts.append(f"not in like: {_few_paths(sorted(extra))}")
        if shapes:
            parts.append(f"other shapes: {_few_paths(shapes)}")
        raise LoadError(f"{where}: does not fit `like`: " + "; ".join(parts))
    return jax.tree_util.tree_unflatten(treedef, out)


def dotted_names(paths: list[Any]) -> list[str]:
    """The names `tt.save` gives tensors in safetensors: `encoder.layers.0.weight`.

    That is the form other tools (Hugging Face, `safetensors.flax`) write and expect. When two
    paths would get one name (`{"a.b": x, "a": {"b": y}}`) or a name would be empty (a lone
    leaf), every name is the key path itself (`['a.b']`).
    """
    names = [".".join(str(k.text) for k in p) for p in paths]
    if len(set(names)) != len(names) or not all(names):
        return [str(p) for p in paths]
    return names


def _few_paths(items: list[str], n: int = 3) -> str:
    shown = ", ".join(s[:160] for s in items[:n])
    return shown + (f" (+{len(items) - n} more)" if len(items) > n else "")
