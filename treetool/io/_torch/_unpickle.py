"""torch's pickles read by treetool's safe pickle machine, with torch's reconstructors.

`TorchMachine` is the opcode machine of `treetool.io._pickle._machine` with three additions:
BINPERSID hands the persistent id to the reader's `persistent_load` (a storage), torch's
reconstructors are an allow-listed family imitated here (`_rebuild_tensor_v2/_v3`,
`_rebuild_parameter(_with_state)`, `_rebuild_from_type_v2` for Tensor and Parameter,
`torch.Size`, `torch.device`; dtypes and storage classes are names), and BUILD on an
`OrderedDict` keeps a state_dict's `_metadata` aside (shown, not counted as leaves). Every
other global stays an inert `GlobalRef`/`Opaque` exactly as in safe pickles: nothing from the
file ever runs.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from treetool._errors import LoadError
from treetool._leaves._lazy_array import LazyArray
from treetool.io._opaque import GlobalRef, Opaque
from treetool.io._pickle._machine import _Fail, _Machine
from treetool.io._pickle._ops import walk_check
from treetool.io._pickle._state import LAZY_MIN_BYTES
from treetool.io._safety._budget import Budget
from treetool.io._torch._rebuild import DTYPES, STORAGE_DTYPES, TensorMaker, dtype_of
from treetool.io._torch._weights_only import ALLOWED

__all__ = ["TorchMachine", "run_pickle"]

_T = "torch._utils"
#: (module, name) -> the tag of torch's reconstructors treetool imitates
TORCH_TAGS: dict[tuple[str, str], str] = {
    (_T, "_rebuild_tensor"): "t_tensor",
    (_T, "_rebuild_tensor_v2"): "t_tensor_v2",
    (_T, "_rebuild_tensor_v3"): "t_tensor_v3",
    (_T, "_rebuild_parameter"): "t_parameter",
    (_T, "_rebuild_parameter_with_state"): "t_parameter",
    ("torch._tensor", "_rebuild_from_type_v2"): "t_from_type",
    ("torch", "Size"): "t_size",
    ("torch", "device"): "t_device",
    ("torch", "Tensor"): "t_class",
    ("torch.nn.parameter", "Parameter"): "t_class",
    **{("torch", n): "t_dtype" for n in DTYPES},
    **{("torch", n): "t_storage" for n in STORAGE_DTYPES},
    **{("torch.cuda", n): "t_storage" for n in STORAGE_DTYPES},
    ("torch.storage", "UntypedStorage"): "t_storage",
    ("torch.storage", "TypedStorage"): "t_storage",
    (_T, "_rebuild_qtensor"): "t_qtensor",
    (_T, "_rebuild_sparse_tensor"): "t_sparse",
    (_T, "_rebuild_meta_tensor_no_storage"): "t_meta",
    (_T, "_rebuild_nested_tensor"): "t_nested",
    ("torch.serialization", "_get_layout"): "t_layout",
}
_PLAIN_TENSORS = {"torch.Tensor", "torch.nn.parameter.Parameter"}


class TorchMachine(_Machine):
    """The safe opcode machine for one torch pickle (`data.pkl`, or a legacy file's object).

    `persistent_load(pid)` makes the storage of a persistent id; `base` is the file offset of
    the pickle's first byte (None when its bytes are not in the file as they are: a deflated
    `data.pkl`), so that large byte strings can stay in the file.
    """

    def __init__(
        self,
        data: Any,
        path: str,
        lazy: bool,
        budget: Budget,
        persistent_load: Callable[[Any], Any],
        maker: TensorMaker,
        base: int | None,
    ) -> None:
        super().__init__(data, path, lazy, False, budget, set())
        self.persistent_load = persistent_load
        self.maker = maker
        self.base = base
        self.state_metadata: list[Any] = []  # the `_metadata` of OrderedDicts, in order

    def payload(self, at: int, n: int, kind: type) -> Any:
        if self.lazy and n >= LAZY_MIN_BYTES and self.base is not None:
            return LazyArray((n,), "uint8", self.path, self.base + at)
        b = self.data[at : at + n]
        return bytearray(b) if kind is bytearray else bytes(b)

    def _refused(self, op: int) -> None:
        if op == 0x51:  # BINPERSID
            if not self.stack:
                raise self.fail("BINPERSID on an empty stack", self.pos - 1)
            pid = self.stack.pop()
            self.stack.append(self._persistent(pid))
            return
        if op == 0x50:  # PERSID (text)
            line, self.pos = self.read_line(self.pos, "PERSID")
            self.stack.append(self._persistent(line.decode("latin1")))
            return
        super()._refused(op)

    def _persistent(self, pid: Any) -> Any:
        try:
            return self.persistent_load(pid)
        except LoadError as e:
            raise _Fail(str(e)) from None

    def find_class(self, module: str, name: str) -> Any:
        tag = TORCH_TAGS.get((module, name))
        if tag is None and f"{module}.{name}" in ALLOWED and module.startswith("torch"):
            tag = "t_allowed"  # on torch's weights_only allow-list: a name, not code to run
        if tag is None:
            return super().find_class(module, name)
        g = self.globals.get((module, name))
        if g is None:
            g = self.globals[(module, name)] = GlobalRef(module, name, tag)
        return g

    def call(self, f: Any, args: Any, at: int) -> Any:
        if type(f) is GlobalRef and f.tag.startswith("t_") and type(args) is tuple:
            try:
                return self._torch_call(f, args, at)
            except LoadError as e:
                raise self.fail(str(e).removeprefix(f"{self.path}: "), at) from None
        return super().call(f, args, at)

    def _torch_call(self, f: GlobalRef, args: tuple, at: int) -> Any:
        tag = f.tag
        tensor = self.maker.tensor
        if tag in ("t_tensor_v2", "t_tensor") and len(args) >= 4:
            return tensor(args[0], args[1], args[2], args[3])
        if tag == "t_tensor_v3" and len(args) >= 7:
            dt = dtype_of(args[6])
            if dt is None:  # a dtype numpy has no type for (complex32, bits8, ...)
                return _odd(str(_name(args[6])).rsplit(".", 1)[-1], {"dtype": _name(args[6]), "shape": args[2],
                                             "stride": args[3], "data": args[0]})  # fmt: skip
            return tensor(args[0], args[1], args[2], args[3], dt)
        if tag == "t_qtensor" and len(args) >= 5:
            q = args[4] if type(args[4]) is tuple else (args[4],)
            facts = {"qscheme": _name(q[0]) if q else None, "params": q[1:], "shape": args[2]}
            return _odd("quantized", {**facts, "stride": args[3], "data": args[0]})
        if tag == "t_sparse" and len(args) >= 2:
            return _odd("sparse", {"layout": args[0], "parts": args[1]})
        if tag == "t_meta" and len(args) >= 3:
            return _odd("meta", {"dtype": _name(args[0]), "shape": args[1], "stride": args[2]})
        if tag == "t_nested" and len(args) >= 4:
            return _odd("nested", {"buffer": args[0], "sizes": args[1], "strides": args[2],
                                   "offsets": args[3]})  # fmt: skip
        if tag == "t_layout" and len(args) == 1 and type(args[0]) is str:
            return args[0]
        if tag == "t_parameter" and args:
            return args[0]  # a Parameter is its tensor (requires_grad and hooks dropped)
        if tag == "t_from_type" and len(args) >= 3:
            func, new_type, inner = args[0], args[1], args[2]
            if type(func) is GlobalRef and func.tag.startswith("t_") and type(inner) is tuple:
                value = self._torch_call(func, inner, at)
            else:
                value = self.call(func, inner if type(inner) is tuple else (inner,), at)
            if type(new_type) is GlobalRef and new_type.class_path in _PLAIN_TENSORS:
                return value
            path = new_type.class_path if type(new_type) is GlobalRef else "?"
            return Opaque(path, (value,), None)
        if tag == "t_size" and len(args) == 1 and type(args[0]) is tuple:
            return args[0]
        if tag == "t_device" and args and all(type(a) in (str, int) for a in args):
            return ":".join(map(str, args))
        return Opaque(f.class_path, args)

    def build(self, inst: Any, state: Any, at: int) -> Any:
        if type(inst) in (collections.OrderedDict, dict) and type(state) is dict:
            meta = state.get("_metadata")
            if meta is not None:
                self.state_metadata.append(meta)
            return inst  # attributes of a dict (`_metadata`): kept aside, not leaves
        return super().build(inst, state, at)


def _name(g: Any) -> Any:
    """`torch.float16` for the global of a torch dtype or scheme; the value itself otherwise."""
    return g.class_path if type(g) is GlobalRef else g


def _odd(kind: str, facts: dict[str, Any]) -> Opaque:
    """A tensor treetool does not make an array of (quantized, sparse, nested, meta, a dtype
    numpy lacks): an `Opaque` whose fields are its facts."""
    return Opaque(f"torch.Tensor[{kind}]", state=facts)


def run_pickle(machine: TorchMachine, start: int = 0) -> tuple[Any, int]:
    """Run one pickle from `start`; (the object, the position after its STOP)."""
    machine.pos = start
    machine.stack, machine.metastack = [], []
    machine.memo = []
    try:
        tree = machine.run()
    except _Fail as e:
        raise LoadError(str(e)) from None
    return tree, machine.pos


def check_tree(tree: Any, budget: Budget) -> list[str]:
    """The one pass over the finished tree (no cycles, depth, expanded size); blocked globals."""
    return walk_check(tree, budget, None, True).blocked
