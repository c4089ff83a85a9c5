"""Functions as leaves: `OpaqueFunction` (a function read from a file, not executed) and the
one notion of a callable's identity that diff uses on both live and loaded trees.

jax treats a function in a pytree (an equinox MLP's `activation`) as one leaf. A safe load
cannot rebuild the function (that would run the file's code), so it becomes an
`OpaqueFunction` at the same path: one leaf labelled by its qualified name (`module.qualname`,
`<lambda> in equinox.nn._mlp`), never its bytecode, closures or the writer's file paths.

Two callables are the same when their module and qualified name are, and, where both sides
have their code, when the code is too (bytecode, names and simple constants). A live function,
a loaded `OpaqueFunction` and a by-reference global (`GlobalRef`) of one name compare equal; a
label never shows a memory address.
"""

from __future__ import annotations

import functools
import types
from typing import Any

from treetool._public import set_module
from treetool._typetests import is_global_ref, is_jit_function

__all__ = ["OpaqueFunction", "callable_identity", "code_key", "function_label"]

#: leaf types that are never functions (checked first, on the hot path of diff)
NOT_CALLABLE = frozenset({int, float, str, bool, bytes, complex, type(None), list, dict, tuple})
_MAX_NAME = 256


def printable_name(x: Any) -> str | None:
    """A name from a file as safe text: None unless a short str; escaped if not printable."""
    if type(x) is not str or not x or len(x) > _MAX_NAME:
        return None
    return x if x.isprintable() else x.encode("unicode_escape").decode("ascii")


def function_label(module: str | None, qualname: str) -> str:
    """How a function is named in every view: `jax.nn.relu`, `<lambda> in mypkg.model`.

    Example:
        >>> function_label("mypkg.model", "<lambda>"), function_label("jax.nn", "relu")
        ('<lambda> in mypkg.model', 'jax.nn.relu')
    """
    if not module:
        return qualname
    head = qualname.split("(", 1)[0]  # `partial(<lambda> in m)` names a partial, not a lambda
    if head.startswith("<") or ".<" in head:
        return f"{qualname} in {module}"
    return f"{module}.{qualname}"


def code_key(co_code: Any, names: Any, consts: Any) -> str | None:
    """A short digest of a function's code: bytecode, global names and simple constants."""
    if not isinstance(co_code, bytes | bytearray):
        return None
    names = tuple(n for n in names if type(n) is str) if isinstance(names, tuple) else ()
    simple = (int, float, str, bytes, bool, complex, type(None))
    kept = tuple(repr(c) for c in consts if type(c) in simple) if isinstance(consts, tuple) else ()
    import hashlib  # here: _hashlib costs ~3 ms at every CLI start otherwise

    h = hashlib.sha1(bytes(co_code), usedforsecurity=False)
    h.update(repr((names, kept)).encode("utf-8", "backslashreplace"))
    return h.hexdigest()[:16]


@set_module("treetool")
class OpaqueFunction:
    """A function found in a file and not executed: one leaf, named by its qualified name.

    Attributes:
        module: the module it was defined in (text from the file), or None if unknown.
        qualname: its qualified name (`relu`, `make.<locals>.<lambda>`).
        kind: what the file made: `function`, `custom_jvp`, `custom_vjp`, `PjitFunction`,
            `partial`, `code`.
        code: a digest of its code (`code_key`) when the file holds the code, else None.

    Example:
        >>> f = OpaqueFunction("equinox.nn._mlp", "<lambda>")
        >>> f
        <function <lambda> in equinox.nn._mlp>
        >>> f.label
        '<lambda> in equinox.nn._mlp'
    """

    __slots__ = ("code", "kind", "module", "qualname")

    def __init__(
        self, module: str | None, qualname: str, kind: str = "function", code: str | None = None
    ) -> None:
        self.module = module
        self.qualname = qualname
        self.kind = kind
        self.code = code

    @property
    def label(self) -> str:
        """`jax._src.nn.functions.relu`, `<lambda> in equinox.nn._mlp`."""
        return function_label(self.module, self.qualname)

    def __repr__(self) -> str:
        return f"<{self.kind} {self.label}>"

    def __eq__(self, other: object) -> bool:
        if type(other) is not OpaqueFunction:
            return NotImplemented
        return (self.module, self.qualname, self.kind, self.code) == (
            other.module,
            other.qualname,
            other.kind,
            other.code,
        )

    def __hash__(self) -> int:
        return hash((OpaqueFunction, self.module, self.qualname, self.kind, self.code))


def _live_code(x: Any) -> str | None:
    """The code digest of a live callable, through `__wrapped__` / `__func__` / `fun` links."""
    for _ in range(6):
        code = getattr(x, "__code__", None)
        if code is not None:
            return code_key(
                getattr(code, "co_code", None),
                getattr(code, "co_names", ()),
                getattr(code, "co_consts", ()),
            )
        nxt = None
        for attr in ("__wrapped__", "__func__", "fun"):
            try:
                nxt = getattr(x, attr, None)
            except Exception:
                nxt = None
            if nxt is not None and nxt is not x:
                break
        if nxt is None:
            return None
        x = nxt
    return None


def callable_identity(x: Any) -> tuple[str | None, str, str | None, str] | None:
    """`(module, qualname, code digest or None, label)` of a function leaf, else None.

    Live functions, classes, custom_jvp/jit wrappers and `functools.partial`, loaded
    `OpaqueFunction` leaves and by-reference globals (`GlobalRef`) all answer; arrays,
    numbers, strings and other objects answer None.

    Example:
        >>> import math
        >>> callable_identity(math.sqrt)
        ('math', 'sqrt', None, 'math.sqrt')
    """
    t = type(x)
    if t in NOT_CALLABLE:
        return None
    if t is OpaqueFunction:
        return x.module, x.qualname, x.code, x.label
    if is_global_ref(x):
        module, name = printable_name(x.module), printable_name(x.name) or "?"  # from a file
        return module, name, None, function_label(module, name)
    if t is functools.partial:
        inner = callable_identity(x.func)
        if inner is None:
            return None
        q = f"partial({inner[3]})"
        return "functools", q, inner[2], f"functools.{q}"
    if t is types.CodeType:  # a code object: named like the one a file holds
        qual = getattr(x, "co_qualname", x.co_name)
        return None, qual, code_key(x.co_code, x.co_names, x.co_consts), qual
    if not callable(x):
        return None
    if is_jit_function(x):
        # jax renames some public jit wrappers (`jnp.tanh.__module__ == "jax.numpy"`), which a
        # file does not record: a jit function is named by the function it wraps, as when loaded
        inner = getattr(x, "__wrapped__", None)
        if inner is not None and inner is not x:
            return callable_identity(inner)
    try:
        qualname = getattr(x, "__qualname__", None)
        module = getattr(x, "__module__", None)
    except Exception:
        return None
    if type(qualname) is not str or not (module is None or type(module) is str):
        return None
    return module, qualname, _live_code(x), function_label(module, qualname)


def same_callable(a: tuple, b: tuple) -> bool:
    """Whether two `callable_identity` answers name one function."""
    return a[0] == b[0] and a[1] == b[1] and (a[2] is None or b[2] is None or a[2] == b[2])
