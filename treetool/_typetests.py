"""Type tests against classes that are not imported eagerly: jax's, and the loaders' `Opaque`.

An object of a jax class can exist only once jax has been imported (and an `Opaque` placeholder
only once `treetool.io._opaque` has), so each test asks `sys.modules` first and answers False
without importing anything when the module is absent (reading a file's structure stays
jax-free, a walk over a live tree never imports the loaders); otherwise it is a plain
`isinstance`. This is treescope's rule for optional libraries (set up only when already in
`sys.modules`), and the one place such tests live: no module tests a type by its name.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = [
    "is_drop_var",
    "is_eqx_module",
    "is_global_ref",
    "is_opaque",
    "is_getattr_key",
    "is_jit_function",
    "is_named_sharding",
    "is_opaque_function",
    "is_raw_jaxpr",
    "is_shape_struct",
    "is_single_device_sharding",
]


def is_opaque(x: Any) -> bool:
    """Whether `x` is an `Opaque` placeholder (a class a file names but treetool did not run).

    Example:
        >>> from treetool.io import Opaque
        >>> is_opaque(Opaque("m.C")), is_opaque({})
        (True, False)
    """
    mod = sys.modules.get("treetool.io._opaque")
    return mod is not None and isinstance(x, mod.Opaque)


def is_global_ref(x: Any) -> bool:
    """Whether `x` is a `GlobalRef` (a function or class a file names, kept as its name)."""
    mod = sys.modules.get("treetool.io._opaque")
    return mod is not None and isinstance(x, mod.GlobalRef)


def is_opaque_function(x: Any) -> bool:
    """Whether `x` is an `OpaqueFunction` (a function a file names, kept unrun)."""
    mod = sys.modules.get("treetool._leaves._callables")
    return mod is not None and isinstance(x, mod.OpaqueFunction)


def is_eqx_module(x: Any) -> bool:
    """Whether `x` is an `equinox.Module` instance (never imports equinox).

    Example:
        >>> import equinox as eqx
        >>> class M(eqx.Module):
        ...     w: int = 1
        >>> is_eqx_module(M()), is_eqx_module(M)
        (True, False)
    """
    eqx = sys.modules.get("equinox")
    cls = getattr(eqx, "Module", None)
    return cls is not None and isinstance(x, cls)


def is_shape_struct(x: Any) -> bool:
    """Whether `x` is a `jax.ShapeDtypeStruct` (an abstract array: shape and dtype, no data).

    Example:
        >>> is_shape_struct((2, 3))
        False
        >>> import jax, numpy as np
        >>> is_shape_struct(jax.ShapeDtypeStruct((2, 3), np.float32))
        True
    """
    jax = sys.modules.get("jax")
    cls = getattr(jax, "ShapeDtypeStruct", None)
    return cls is not None and isinstance(x, cls)


def is_getattr_key(k: Any) -> bool:
    """Whether `k` is jax's `GetAttrKey` key entry (`.field` in a path)."""
    tu = sys.modules.get("jax.tree_util")
    cls = getattr(tu, "GetAttrKey", None)
    return cls is not None and isinstance(k, cls)


def is_single_device_sharding(s: Any) -> bool:
    """Whether `s` is a `jax.sharding.SingleDeviceSharding`."""
    sh = sys.modules.get("jax.sharding")
    cls = getattr(sh, "SingleDeviceSharding", None)
    return cls is not None and isinstance(s, cls)


def is_named_sharding(s: Any) -> bool:
    """Whether `s` is a `jax.sharding.NamedSharding`."""
    sh = sys.modules.get("jax.sharding")
    cls = getattr(sh, "NamedSharding", None)
    return cls is not None and isinstance(s, cls)


def _core() -> Any:
    """`jax.extend.core` (jax's public home of the jaxpr classes) when jax is loaded, else None."""
    if "jax" not in sys.modules:
        return None
    core = sys.modules.get("jax.extend.core")
    if core is None:
        import jax.extend.core as core  # jax is loaded: this costs little
    return core


def is_raw_jaxpr(x: Any) -> bool:
    """Whether `x` is a jax `ClosedJaxpr` or `Jaxpr` (as `jax.make_jaxpr` returns).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> is_raw_jaxpr(jax.make_jaxpr(jnp.sin)(1.0)), is_raw_jaxpr("jaxpr")
        (True, False)
    """
    core = _core()
    return core is not None and isinstance(x, (core.ClosedJaxpr, core.Jaxpr))


def is_drop_var(x: Any) -> bool:
    """Whether `x` is a jaxpr's `DropVar` (an output nobody reads, printed `_`)."""
    core = _core()
    return core is not None and isinstance(x, core.DropVar)


def is_jit_function(x: Any) -> bool:
    """Whether `x` is a function wrapped by `jax.jit` (jaxlib's `PjitFunction`).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> is_jit_function(jax.jit(jnp.sin)), is_jit_function(jnp.sin.__wrapped__)
        (True, False)
    """
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(x, _jit_type(jax))


_JIT_TYPE: list[type] = []


def _jit_type(jax: Any) -> type:
    if not _JIT_TYPE:
        _JIT_TYPE.append(type(jax.jit(abs)))
    return _JIT_TYPE[0]
