"""Would `torch.load(weights_only=True)` accept this file? torch's allow-list, applied statically.

What `torch.serialization.get_unsafe_globals_in_checkpoint` does, without torch: every GLOBAL
the pickle names (a static scan of its opcodes: nothing is built) that is not on the default
allow-list of `torch._weights_only_unpickler._get_allowed_globals()` (torch 2.13, copied
below), with what each is. The verdict also refuses what that unpickler refuses besides
globals: an opcode it does not implement (STACK_GLOBAL of pickle protocols 4 and 5, ...), a
TorchScript archive, the old tar format.
"""

from __future__ import annotations

from _compat_pickle import IMPORT_MAPPING, NAME_MAPPING
from typing import Any

from treetool._text import safe

__all__ = ["WeightsOnly", "describe", "fact_lines", "saved_on", "scan", "verdict"]

_TYPES = ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte")
_DTYPES = (
    "bfloat16 bits16 bits1x8 bits2x4 bits4x2 bits8 bool complex128 complex32 complex64 float16 "
    "float32 float4_e2m1fn_x2 float64 float8_e4m3fn float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz "
    "float8_e8m0fnu int16 int32 int64 int8 qint32 qint8 quint2x4 quint4x2 quint8 uint8 "
    + " ".join(f"int{i} uint{i}" for i in range(1, 8))
    + " uint16 uint32 uint64"
).split()
_REBUILD = [
    "_rebuild_device_tensor_from_cpu_tensor",
    "_rebuild_device_tensor_from_numpy",
    "_rebuild_meta_tensor_no_storage",
    "_rebuild_nested_tensor",
    "_rebuild_parameter",
    "_rebuild_parameter_with_state",
    "_rebuild_qtensor",
    "_rebuild_sparse_tensor",
    "_rebuild_tensor",
    "_rebuild_tensor_v2",
    "_rebuild_tensor_v3",
    "_rebuild_wrapper_subclass",
]
_STORAGES = [*_TYPES, "Bool", "ComplexDouble", "ComplexFloat"]

#: `torch._weights_only_unpickler._get_allowed_globals()` of torch 2.13 (144 names)
ALLOWED: frozenset[str] = frozenset(
    [
        "_codecs.encode", "builtins.bytearray", "builtins.complex", "builtins.set",
        "collections.Counter", "collections.OrderedDict", "torch.Size", "torch.Tensor",
        "torch._tensor._rebuild_from_type_v2", "torch.device", "torch.nn.parameter.Parameter",
        "torch.serialization._get_layout", "torch.storage.TypedStorage",
        "torch.storage.UntypedStorage",
        *(f"torch.{d}" for d in _DTYPES),
        *(f"torch._utils.{f}" for f in _REBUILD),
        *(f"torch.{s}Storage" for s in _STORAGES),
        *(f"torch.cuda.{s}Storage" for s in _STORAGES),
        *(f"torch.{q}Storage" for q in ("QInt32", "QInt8", "QUInt2x4", "QUInt4x2", "QUInt8")),
        *(f"torch.{t}Tensor" for t in (*_TYPES, "Bool")),
        *(f"torch.cuda.{t}Tensor" for t in (*_TYPES, "Bool")),
        *(f"torch.sparse.{t}Tensor" for t in _TYPES),
        *(f"torch.cuda.sparse.{t}Tensor" for t in _TYPES),
        *(
            f"torch.{q}"
            for q in (
                "per_channel_affine", "per_channel_affine_float_qparams",
                "per_channel_symmetric", "per_tensor_affine", "per_tensor_symmetric",
            )
        ),
    ]
)  # fmt: skip

#: the opcodes torch's weights_only unpickler implements; any other makes it refuse the file
_OPCODES = frozenset(
    [
        "GLOBAL",
        "NEWOBJ",
        "REDUCE",
        "BUILD",
        "APPEND",
        "APPENDS",
        "SETITEM",
        "SETITEMS",
        "MARK",
        "TUPLE",
        "TUPLE1",
        "TUPLE2",
        "TUPLE3",
        "NONE",
        "NEWFALSE",
        "NEWTRUE",
        "EMPTY_TUPLE",
        "EMPTY_LIST",
        "EMPTY_DICT",
        "EMPTY_SET",
        "BININT",
        "BININT1",
        "BININT2",
        "BINFLOAT",
        "BINUNICODE",
        "SHORT_BINSTRING",
        "BINPERSID",
        "BINGET",
        "LONG_BINGET",
        "BINPUT",
        "LONG_BINPUT",
        "LONG1",
        "PROTO",
        "STOP",
    ]
)
_BLOCKED_MODULES = ("sys", "os", "posix", "nt")
_RUNS_CODE = {
    "builtins.eval", "builtins.exec", "builtins.getattr", "builtins.__import__",
    "builtins.compile", "builtins.open", "subprocess.Popen", "subprocess.run",
    "subprocess.call", "subprocess.check_output", "runpy._run_code", "pty.spawn",
    "importlib.import_module", "webbrowser.open",
}  # fmt: skip


class WeightsOnly(dict):  # a dict: it goes into `--json` as it is
    """The report: `accepted` (bool), `unsafe_globals` ([{"global", "what"}]), `reason`."""


def describe(name: str) -> str:
    """What a global that weights_only refuses is, in a few words."""
    module = name.rsplit(".", 1)[0]
    top = module.split(".", 1)[0]
    if top in _BLOCKED_MODULES or name in _RUNS_CODE or top in ("subprocess", "shutil", "socket"):
        return "runs commands or code when loaded (a malicious or unsafe file)"
    if top == "__torch__":
        return "a TorchScript class compiled into the archive (its code is under code/)"
    if top == "__main__":
        return "a class or function defined in the script that saved the file (__main__)"
    if module.startswith("torch.nn.modules") or module.startswith("torch.nn."):
        return "a torch.nn class: the file holds a pickled nn.Module (save its state_dict)"
    if top == "torch":
        return "a torch object outside weights_only's default allow-list"
    if top in ("numpy", "numpy_core"):
        return "a numpy object (allow it with torch.serialization.add_safe_globals)"
    if top in ("lightning", "pytorch_lightning", "lightning_fabric"):
        return "a Lightning class (checkpoint callbacks or hyper-parameters)"
    if top in ("builtins", "collections", "argparse", "functools", "typing", "enum", "pathlib"):
        return f"a Python standard-library object ({module})"
    return f"a class or function of the package {top!r}"


#: opcode -> the bytes of its argument, for the opcodes torch's scan skips by a fixed size
_SKIP = {
    **dict.fromkeys(b"\x81Rbaesu(t\x85\x86\x87N\x89\x88)]}\x8fQ", 0),
    **dict(zip(b"JKMGhjqr\x80", (4, 1, 2, 8, 1, 4, 1, 4, 1))),
}


def _torch_scan(pkl: bytes) -> list[str] | None:
    """The GLOBALs of a pickle that uses only the opcodes torch's unpickler implements, read
    as `torch._weights_only_unpickler.get_globals_in_pkl` reads them; None for any other
    pickle (another opcode, a truncated one), which `scan` then reads with pickletools."""
    found: dict[str, None] = {}
    pos, end, skip = 0, len(pkl), _SKIP
    try:
        while pos < end:
            op = pkl[pos]
            pos += 1
            n = skip.get(op)
            if n is not None:
                pos += n
            elif op == 0x58:  # BINUNICODE
                pos += 4 + int.from_bytes(pkl[pos : pos + 4], "little")
            elif op == 0x55 or op == 0x8A:  # SHORT_BINSTRING, LONG1
                pos += 1 + pkl[pos]
            elif op == 0x63:  # GLOBAL: two lines
                nl = pkl.index(b"\n", pos)
                nl2 = pkl.index(b"\n", nl + 1)
                module, attr = pkl[pos:nl].decode("utf-8"), pkl[nl + 1 : nl2].decode("utf-8")
                pos = nl2 + 1
                if (module, attr) in NAME_MAPPING:  # python 2 names, as torch maps them
                    module, attr = NAME_MAPPING[(module, attr)]
                elif module in IMPORT_MAPPING:
                    module = IMPORT_MAPPING[module]
                found[f"{module}.{attr}"] = None
            elif op == 0x2E:  # STOP
                return list(found)
            else:
                return None
    except (ValueError, IndexError, UnicodeError):
        return None
    return None


def scan(pkl: bytes) -> tuple[list[str], str | None]:
    """(the GLOBALs of a pickle in order, the first opcode torch's unpickler lacks or None)."""
    fast = _torch_scan(pkl)
    if fast is not None:  # every file torch wrote: no opcode it lacks
        return fast, None
    import pickletools  # any other pickle: every opcode named, the first one torch lacks

    found: dict[str, None] = {}
    bad: str | None = None
    try:
        for op, arg, _ in pickletools.genops(pkl):
            name = op.name
            if name == "GLOBAL" and type(arg) is str:
                module, _, attr = arg.partition(" ")
                if (module, attr) in NAME_MAPPING:  # python 2 names, as torch maps them
                    module, attr = NAME_MAPPING[(module, attr)]
                elif module in IMPORT_MAPPING:
                    module = IMPORT_MAPPING[module]
                found[f"{module}.{attr}"] = None
            elif name not in _OPCODES and bad is None:
                bad = name
            if name == "STOP":
                break
    except (ValueError, TypeError, IndexError, UnicodeError, OverflowError) as e:
        bad = bad or f"a malformed pickle ({str(e)[:80]})"
    return list(found), bad


def verdict(pkls: list[bytes], *, refuse: str | None = None) -> WeightsOnly:
    """The report over the pickles torch would read (`refuse`: a reason it refuses anyway)."""
    names: dict[str, None] = {}
    bad: str | None = None
    for pkl in pkls:
        found, b = scan(pkl)
        names.update(dict.fromkeys(found))
        bad = bad or b
    unsafe = [n for n in names if n not in ALLOWED]
    reasons = []
    if refuse:
        reasons.append(refuse)
    if unsafe:
        reasons.append(
            f"{len(unsafe)} global{'s' if len(unsafe) != 1 else ''} not on the allow-list"
        )
    if bad:
        reasons.append(
            f"the pickle uses {bad}, which the weights_only unpickler does not implement"
        )
    out = WeightsOnly(
        accepted=not reasons,
        unsafe_globals=[{"global": n, "what": describe(n)} for n in unsafe],
        reason="; ".join(reasons) if reasons else "every global is on torch's allow-list",
    )
    return out


def saved_on(report: WeightsOnly, locations: list[str]) -> WeightsOnly:
    """The report with the devices the tensors were saved on: any but the CPU means that
    `torch.load` without `map_location` fails on a machine without that device (torch
    restores each storage to its saved location), weights_only or not.

    Example:
        >>> r = saved_on(verdict([b"\\x80\\x02}q\\x00."]), ["cpu", "cuda:0"])
        >>> r["accepted"], r["saved_on"], r["map_location"]
        (True, ['cpu', 'cuda:0'], 'needed: saved on cuda:0')
    """
    out = WeightsOnly(report)
    if locations:
        out["saved_on"] = list(locations)
    away = [d for d in locations if d.split(":", 1)[0] != "cpu"]
    if away:
        out["map_location"] = f"needed: saved on {', '.join(away)}"
        out["reason"] = (
            f"{out['reason']}; saved on {', '.join(away)}: without map_location it fails on a "
            "machine without that device"
        )
    return out


#: a package with more globals than this is one group: a header, then its names wrapped
_GROUP_OVER = 3
_WIDTH = 100


def _grouped(unsafe: list[dict[str, str]]) -> list[str]:
    """The refused globals, one line each, but a package with more than `_GROUP_OVER` of
    them grouped: `  pkg: N globals, what they are` and their names under it, wrapped."""
    by_top: dict[str, list[dict[str, str]]] = {}
    for g in unsafe:
        by_top.setdefault(str(g["global"]).split(".", 1)[0], []).append(g)
    lines: list[str] = []
    for top, group in by_top.items():
        if len(group) <= _GROUP_OVER:
            lines.extend(f"  {safe(g['global'])}: {safe(g['what'])}" for g in group)
            continue
        whats = list(dict.fromkeys(str(g["what"]) for g in group))
        what = whats[0] if len(whats) == 1 else f"{len(whats)} kinds"
        lines.append(f"  {safe(top)}: {len(group)} globals, {safe(what)}:")
        row = "   "
        for g in group:
            name = safe(str(g["global"])[len(top) + 1 :] or str(g["global"]))
            if len(row) > 4 and len(row) + len(name) + 2 > _WIDTH:
                lines.append(row + ",")
                row = "   "
            row += ("," if len(row) > 4 else "") + " " + name
        lines.append(row)
    return lines


def fact_lines(torch: dict[str, Any]) -> list[str]:
    """A torch file's facts as text lines: its kind, the weights_only report, tied names."""
    report = torch.get("weights_only") or {}
    lines = [f"torch checkpoint ({safe(str(torch.get('format', '?')))} format)"]
    away = [d for d in report.get("saved_on", ()) if str(d).split(":", 1)[0] != "cpu"]
    where = safe(", ".join(map(str, away)))
    if report.get("accepted") and away:
        lines.append(
            f"weights_only: saved on {where}: torch.load(weights_only=True) fails on a "
            f"machine without {where} (map_location needed); its globals are all on the "
            "allow-list: torch.load(f, weights_only=True, map_location='cpu') would accept it"
        )
    elif report.get("accepted"):
        lines.append("weights_only: torch.load(weights_only=True) would accept this file")
    else:
        lines.append(
            "weights_only: torch.load(weights_only=True) would refuse this file: "
            + safe(str(report.get("reason", "")))
        )
        lines.extend(_grouped(report.get("unsafe_globals", [])))
        if away:
            lines.append(
                f"  saved on {where}: without map_location='cpu' torch.load also fails on a "
                f"machine without {where}"
            )
    for cls in torch.get("modules") or ():
        lines.append(
            f"module: a pickled {safe(str(cls))}, shown by its state_dict() names "
            "(its attributes with --raw / raw=True)"
        )
    for path, what in (torch.get("tied") or {}).items():
        lines.append(f"tied: {safe(path)}: {safe(what)}")
    for group in torch.get("views") or ():
        views = group.get("views") or {}
        lines.append(
            f"views of one storage {safe(repr(str(group.get('storage'))))}: {len(views)} tensors "
            "(not tied; bytes counted once)"
        )
        lines.extend(f"  {safe(p)}: bytes {a}-{b}" for p, (a, b) in views.items())
    return lines
