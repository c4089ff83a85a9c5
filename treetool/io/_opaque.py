"""`Opaque`: the inert stand-in for an object whose class treetool would not run.

The safe unpickler never calls a global that is not on its allow-list. A class instance or a
call result it meets becomes an `Opaque` that records the class path, the constructor
arguments and the state the file gave it. `Opaque` is a pytree node, both for treetool's own
model (no jax needed) and for jax, so a pickled equinox module shows `.layers[0].weight`, as the
live object does.

How an `Opaque` opens (its children, in order):

- classes of well-known installed libraries (jax, equinox, flax, optax, haiku, chex) are looked
  up by import (never called): dataclass fields without the static marks, NamedTuple fields
  for positional arguments, `.value` for flax nnx Variables; this gives jax's own paths;
- any other class: the names of its state (`.name`), then its positional arguments (`[i]`),
  items added with APPEND (`[i]`) and with SETITEM (`[key]`).

jax registration: `Opaque` is registered with `jax.tree_util` as soon as jax is imported, by
whoever imports it: right away if jax is already in `sys.modules` when this module is imported,
otherwise through a one-shot import hook on `sys.meta_path` that runs after `jax` finishes
importing. Reading a file therefore never imports jax, and a tree loaded before jax was
imported still flattens with jax afterwards (`tt.load(f)`, then `import jax`, then
`jax.tree.leaves(tree)` sees the fields, not one opaque leaf).

Why an import hook, when treetool otherwise stays out of jax's way: every other moment to
register comes too late or costs too much.

- At treetool's next use (or when treetool first flattens an `Opaque`): the user above never
  comes back through treetool. jax flattens in C++ by looking the type up in its registry; it
  calls nothing on an unregistered object, which is silently one leaf, so there is no first
  use to catch.
- Importing jax on `load`: about a second, and it breaks the promise that reading a file's
  structure does not import jax (the CLI's start-up depends on it).
- An audit hook (`sys.addaudithook`, event "import"): fires before the module runs, not after,
  and can never be removed: a cost on every audited event for the life of the process.
- jax's own extension points: its plugin entry points are PJRT backends, discovered when a
  backend first initialises (not at import, not at flatten time).

So the hook is kept as small as it can be: it is armed only when jax is not imported yet, it
looks at no module but `jax`, it takes itself off `sys.meta_path` at the first `import jax`,
and it wraps that one module's `exec_module` for that one call, leaving jax's loader as it
was found.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import importlib
import importlib.util
import sys
import threading
from collections.abc import Callable
from typing import Any

from treetool._paths._path import DictKey, GetAttrKey, Key, SequenceKey
from treetool._public import set_module
from treetool._tree._model import register_flattener

__all__ = ["GlobalRef", "Opaque"]

#: top-level packages whose classes lend their field layout when already imported (never imported)
KNOWN_PACKAGES = frozenset({"jax", "jaxlib", "equinox", "flax", "optax", "haiku", "chex"})
#: the ones imported for their layouts when not imported yet (chex only lends one when loaded)
_IMPORTABLE = frozenset({"jax", "equinox", "flax", "optax", "haiku"})
#: submodules that importing their package does not load, also imported for their layouts
_IMPORTABLE_SUBMODULES = ("flax.nnx", "flax.training.train_state")


@set_module("treetool.io")
class GlobalRef:
    """A reference to a module-level name (a class or function) found in a file, not imported.

    It is a leaf. `class_path` is "module.qualname".

    Example:
        >>> GlobalRef("os", "system")
        GlobalRef('os.system')
    """

    __slots__ = ("class_name", "class_path", "module", "name", "tag")

    def __init__(self, module: str, name: str, tag: str = "") -> None:
        self.module = module
        self.name = name
        self.tag = tag  # the allow-listed imitation the unpickler runs for it; "" if blocked
        self.class_path = f"{module}.{name}"
        self.class_name = name.rsplit(".", 1)[-1]

    def __repr__(self) -> str:
        return f"GlobalRef({self.class_path!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is GlobalRef and other.class_path == self.class_path

    def __hash__(self) -> int:
        return hash(self.class_path)


@set_module("treetool.io")
class Opaque:
    """An object of a class that was not imported nor run: its class path and recorded state.

    Attributes:
        class_path: "module.Qualname" of the class (or function) the file names.
        class_name: the short class name, shown as the node type.
        args: positional arguments of the call that made it.
        kwargs: keyword arguments (NEWOBJ_EX).
        state: what `__setstate__` would have received (usually a dict of attributes).
        listitems / dictitems: what APPEND / SETITEM added.
        source: for the result of calling an opaque object, that object (`class_path` is then
            its class path followed by "()").

    Example:
        >>> import treetool as tt
        >>> o = Opaque("mylib.Linear", state={"weight": 1.0, "bias": 2.0})
        >>> o
        Opaque('mylib.Linear', fields=['weight', 'bias'])
        >>> [str(p) for p, _ in tt.leaves_with_path({"layer": o})]
        ["['layer'].weight", "['layer'].bias"]
        >>> o.weight
        1.0
    """

    __slots__ = (
        "args",
        "class_name",
        "class_path",
        "dictitems",
        "kwargs",
        "listitems",
        "source",
        "state",
    )

    def __init__(
        self,
        class_path: str,
        args: tuple = (),
        kwargs: dict | None = None,
        state: Any = None,
    ) -> None:
        self.class_path = class_path
        self.class_name = class_path.rsplit(".", 1)[-1]
        self.args = args
        self.kwargs = kwargs if kwargs is not None else {}
        self.state = state
        self.listitems: list = []
        self.dictitems: dict = {}
        self.source: Opaque | None = None  # the opaque object this one was called from

    def __repr__(self) -> str:
        names = [str(k) for k, _ in _slots(self)]
        shown = [n[1:] if n.startswith(".") else n for n in names[:8]]
        more = ", ..." if len(names) > 8 else ""
        return f"Opaque({self.class_path!r}, fields={shown!r}{more})".replace("']...", "', ...]")

    def __getattr__(self, name: str) -> Any:
        # Field access by name (`o.weight`): the names of the state and of the children.
        if not name.startswith("__"):
            state = _state_dict(object.__getattribute__(self, "state"))
            if name in state:
                return state[name]
            if not name.startswith("_"):  # not for probes such as _repr_html_
                for key, slot in _slots(self):
                    if type(key) is GetAttrKey and key.name == name:
                        return _get(self, slot)
        raise AttributeError(f"Opaque({self.class_path!r}) has no field {name!r}")

    @property
    def fields(self) -> dict[str, Any]:
        """The state as a dict of attribute names (empty if the state is not a mapping)."""
        return _state_dict(self.state)

    def _copy(self) -> Opaque:
        args = tuple(dict(a) if isinstance(a, dict) else a for a in self.args)
        new = Opaque(self.class_path, args, dict(self.kwargs), _copy_state(self.state))
        new.listitems = list(self.listitems)
        new.dictitems = dict(self.dictitems)
        new.source = self.source
        return new


def _state_dict(state: Any) -> dict:
    if isinstance(state, dict):
        return state
    if isinstance(state, tuple) and len(state) == 2:
        out: dict = {}
        for part in state:
            if isinstance(part, dict):
                out.update(part)
        return out
    return {}


def _copy_state(state: Any) -> Any:
    if isinstance(state, dict):
        return {k: dict(v) if isinstance(v, dict) else v for k, v in state.items()}
    if isinstance(state, tuple) and len(state) == 2:
        return tuple(dict(p) if isinstance(p, dict) else p for p in state)
    return state


# --- layouts ------------------------------------------------------------------------------

# A slot says where a child lives: ("state", name), ("slot", name), ("arg", i), ("item", i),
# ("dictitem", key), ("whole_state", None). A layout is a function Opaque -> [(Key, slot)].
_layouts: dict[str, Callable[[Opaque], list[tuple[Key, tuple]]] | None] = {}


def _import_known(class_path: str) -> Any:
    """The class object for a class of a well-known library that is already imported, or None
    (never called, never imported)."""
    module, _, qual = class_path.rpartition(".")
    parts = class_path.split(".")
    if parts[0] not in KNOWN_PACKAGES or not all(p.isidentifier() for p in parts):
        return None
    # The file chooses the class path, so it must not choose what gets imported: nothing is
    # (a pickle naming chex imported chex, absl, unittest and jax.test_util: 1.5 s). A class
    # whose module is loaded already (the user's program imported it) lends its layout; any
    # other is read by the generic layout. Never a test module. The qualname may be nested
    # (Outer.Inner): find the longest loaded module prefix.
    names = module.split(".")
    if any(_is_test_module(n) for n in names):
        return None
    # the model libraries themselves (jax, equinox, flax, optax, haiku) may be imported for
    # their layouts, as a program using the file would, and the two flax submodules that
    # importing flax does not load; never a test helper library (chex imports absl, unittest
    # and jax.test_util: 1.5 s), never another submodule
    subs = (m for m in _IMPORTABLE_SUBMODULES if (module + ".").startswith(m + "."))
    for pkg in (names[0], *subs):
        if pkg in sys.modules:
            continue
        if names[0] not in _IMPORTABLE:
            return None
        try:
            if importlib.util.find_spec(names[0]) is None:
                return None
            importlib.import_module(pkg)
        except Exception:
            return None
    for i in range(len(names), 0, -1):
        obj: Any = sys.modules.get(".".join(names[:i]))
        if obj is None:
            continue
        try:
            for attr in [*names[i:], qual]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj if isinstance(obj, type) else None
    return None


def _is_test_module(name: str) -> bool:
    return (
        name in ("tests", "test", "testing", "conftest")
        or name.startswith("test_")
        or (name.endswith(("_test", "_tests")))
    )


def _is_static_field(f: dataclasses.Field) -> bool:
    md = f.metadata
    return bool(md.get("static", False)) or md.get("pytree_node", True) is False


def _known_layout(cls: type) -> Callable[[Opaque], list[tuple[Key, tuple]]] | None:
    flax_variable = None
    nnx = sys.modules.get("flax.nnx")
    if nnx is not None:
        flax_variable = getattr(nnx, "Variable", None)
    if flax_variable is not None and issubclass(cls, flax_variable):
        return lambda o: (
            [(GetAttrKey("value"), ("state", "_raw_value"))] if "_raw_value" in o.fields else []
        )
    if issubclass(cls, collections.abc.Mapping):
        return _mapping_layout
    fields = getattr(cls, "_fields", None)
    if issubclass(cls, tuple) and isinstance(fields, tuple):
        tuple_fields: tuple[Any, ...] = fields
        return lambda o: [
            (GetAttrKey(n), ("arg", i)) for i, n in enumerate(tuple_fields) if i < len(o.args)
        ]
    if dataclasses.is_dataclass(cls):
        names = [f.name for f in dataclasses.fields(cls) if not _is_static_field(f)]
        return lambda o: [(GetAttrKey(n), ("state", n)) for n in names if n in o.fields]
    return None


def _mapping_layout(o: Opaque) -> list[tuple[Key, tuple]]:
    # A Mapping class of a known library (flax FrozenDict, nnx State): jax keys its children
    # by the mapping's keys, sorted; the items are in the one dict the object was built from.
    if o.args and isinstance(o.args[0], dict):
        src, slot = o.args[0], "argdict"
    else:
        dicts = [k for k, v in o.fields.items() if isinstance(v, dict)]
        if len(dicts) != 1:
            return _generic_layout(o)
        src, slot = o.fields[dicts[0]], dicts[0]
    try:
        keys = sorted(src)
    except TypeError:
        keys = list(src)
    return [(DictKey(k), ("mapitem", (slot, k))) for k in keys]


def _generic_layout(o: Opaque) -> list[tuple[Key, tuple]]:
    out: list[tuple[Key, tuple]] = []
    state = o.state
    if isinstance(state, dict):
        out.extend((_name_key(k), ("state", k)) for k in state)
    elif (
        isinstance(state, tuple)
        and len(state) == 2
        and all(isinstance(p, dict | None) for p in state)
    ):
        if isinstance(state[0], dict):
            out.extend((_name_key(k), ("state", k)) for k in state[0])
        if isinstance(state[1], dict):
            out.extend((_name_key(k), ("slot", k)) for k in state[1])
    elif state is not None:
        out.append((GetAttrKey("__state__"), ("whole_state", None)))
    n = len(o.args)
    out.extend((SequenceKey(i), ("arg", i)) for i in range(n))
    out.extend((SequenceKey(n + i), ("item", i)) for i in range(len(o.listitems)))
    out.extend((DictKey(k), ("dictitem", k)) for k in o.dictitems)
    return out


def _name_key(k: Any) -> Key:
    return GetAttrKey(k) if isinstance(k, str) else DictKey(k)


def _slots(o: Opaque) -> list[tuple[Key, tuple]]:
    cp = o.class_path
    if cp not in _layouts:
        cls = _import_known(cp) if cp.split(".", 1)[0] in KNOWN_PACKAGES else None
        _layouts[cp] = _known_layout(cls) if cls is not None else None
    layout = _layouts[cp]
    return layout(o) if layout is not None else _generic_layout(o)


def _get(o: Opaque, slot: tuple) -> Any:
    kind, where = slot
    if kind == "state":
        return o.state[where] if isinstance(o.state, dict) else _state_dict(o.state)[where]
    if kind == "slot":
        return o.state[1][where]
    if kind == "arg":
        return o.args[where]
    if kind == "item":
        return o.listitems[where]
    if kind == "dictitem":
        return o.dictitems[where]
    if kind == "mapitem":
        return _mapping_source(o, where[0])[where[1]]
    return o.state


def _set(o: Opaque, slot: tuple, value: Any) -> None:
    kind, where = slot
    if kind == "state":
        if isinstance(o.state, dict):
            o.state[where] = value
        else:
            o.state[0][where] = value
    elif kind == "slot":
        o.state[1][where] = value
    elif kind == "arg":
        args = list(o.args)
        args[where] = value
        o.args = tuple(args)
    elif kind == "item":
        o.listitems[where] = value
    elif kind == "dictitem":
        o.dictitems[where] = value
    elif kind == "mapitem":
        _mapping_source(o, where[0])[where[1]] = value
    else:
        o.state = value


def _mapping_source(o: Opaque, slot: str) -> dict:
    return o.args[0] if slot == "argdict" else o.fields[slot]


def opaque_children(o: Opaque) -> list[tuple[Key, Any]]:
    """The children of an Opaque node: `[(Key, child)]` (the rule jax uses too)."""
    return [(k, _get(o, s)) for k, s in _slots(o)]


register_flattener(Opaque, opaque_children)


# --- jax registration ---------------------------------------------------------------------


class _Aux:
    """jax aux data of an Opaque: the object without its children, compared by content."""

    __slots__ = ("slots", "template")

    def __init__(self, template: Opaque, slots: tuple) -> None:
        self.template = template
        self.slots = slots

    def _static(self) -> tuple:
        t = self.template
        child = {w for kind, w in self.slots if kind in ("state", "slot")}
        child |= {w[0] for kind, w in self.slots if kind == "mapitem" and isinstance(w, tuple)}
        state = _state_dict(t.state)
        rest = tuple(sorted((repr(k), repr(v)) for k, v in state.items() if k not in child))
        return (t.class_path, self.slots, rest, repr(t.kwargs))

    def __eq__(self, other: object) -> bool:
        return type(other) is _Aux and self._static() == other._static()

    def __hash__(self) -> int:
        return hash((self.template.class_path, self.slots))

    def __repr__(self) -> str:
        return f"Opaque({self.template.class_path!r})"


def _flatten_with_keys(o: Opaque) -> tuple[list[tuple[Any, Any]], _Aux]:
    slots = _slots(o)
    kids = [(k.to_jax(), _get(o, s)) for k, s in slots]
    return kids, _Aux(o, tuple(_hashable_slot(s) for _, s in slots))


def _hashable_slot(slot: tuple) -> tuple:
    try:
        hash(slot)
    except TypeError:
        return (slot[0], repr(slot[1]))
    return slot


def _flatten(o: Opaque) -> tuple[list[Any], _Aux]:
    slots = _slots(o)
    return [_get(o, s) for _, s in slots], _Aux(o, tuple(_hashable_slot(s) for _, s in slots))


def _unflatten(aux: _Aux, children: Any) -> Opaque:
    new = aux.template._copy()
    for (_, slot), child in zip(_slots(aux.template), children):
        _set(new, slot, child)
    return new


_registered = False
#: two reads at once (a diff's two sides) may both find jax imported: one registers. Held
#: only around the registration, never an import (a thread importing jax holds jax's own
#: import lock while its hook registers)
_register_lock = threading.Lock()


def register_with_jax() -> None:
    """Register `Opaque` with `jax.tree_util` (idempotent, thread-safe; jax must be importable)."""
    global _registered
    if _registered:
        return
    import jax.tree_util as jtu

    with _register_lock:
        if _registered:
            return
        _registered = True
        jtu.register_pytree_with_keys(Opaque, _flatten_with_keys, _unflatten, _flatten)


class _JaxImportHook:
    """Registers `Opaque` with jax right after `import jax` completes, then removes itself.

    A meta path finder needs only `find_spec`; not subclassing `importlib.abc.MetaPathFinder`
    spares every command importing `importlib.abc` (which imports `importlib.resources`,
    `tempfile` and `random`).
    """

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "jax":
            return None
        _remove_hook()
        spec = importlib.util.find_spec("jax")
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        exec_module = loader.exec_module
        own = vars(loader).get("exec_module") if hasattr(loader, "__dict__") else None

        def exec_and_register(module: Any) -> None:
            try:
                exec_module(module)
            finally:  # jax's loader is left as it was found
                if own is None:
                    del loader.exec_module
                else:
                    loader.exec_module = own  # type: ignore[method-assign]
            register_with_jax()

        loader.exec_module = exec_and_register  # type: ignore[method-assign]
        return spec


_hook: _JaxImportHook | None = None


_fired = False  # the hook saw `import jax` start: it is never armed again


def _remove_hook() -> None:
    global _hook, _fired
    with _register_lock:
        _fired = True
        if _hook is not None and _hook in sys.meta_path:
            sys.meta_path.remove(_hook)
        _hook = None


def ensure_jax_registration() -> None:
    """Register now if jax is imported; otherwise arm the one-shot import hook."""
    global _hook
    if _registered:
        return
    jax = sys.modules.get("jax")
    if jax is not None and hasattr(jax, "tree_util"):
        if not getattr(getattr(jax, "__spec__", None), "_initializing", False):
            register_with_jax()  # (while another thread imports jax, its hook registers)
        return
    with _register_lock:  # one hook, however many threads read at once
        if _hook is None and not _fired and "jax" not in sys.modules:
            _hook = _JaxImportHook()
            sys.meta_path.insert(0, _hook)


ensure_jax_registration()
