"""A corpus of hand-assembled malicious pickles: none may run, each names what it blocked.

Every file in the corpus creates a canary file when `pickle.load` runs it (checked by
`test_corpus_is_live`, in a subprocess); `tt.load` must create none and report the global.
"""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import treetool as tt
import treetool.io as tio
from treetool import LoadError, UnsafeError


class Canary:
    """Writes the canary when constructed or when its state is set (as a pickled class)."""

    path = ""

    def __new__(cls, *args, **kwargs):
        if args and isinstance(args[0], str):
            open(args[0], "w").close()
        return super().__new__(cls)

    def __setstate__(self, state):
        open(state["canary"], "w").close()


# --- a tiny assembler -----------------------------------------------------------------


def u(s: str) -> bytes:
    """SHORT_BINUNICODE."""
    b = s.encode()
    return b"\x8c" + bytes([len(b)]) + b


def g(module: str, name: str) -> bytes:
    """GLOBAL (text form)."""
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def sg(module: str, name: str) -> bytes:
    """STACK_GLOBAL."""
    return u(module) + u(name) + b"\x93"


P4 = b"\x80\x04"
STOP = b"."
MARK, TUPLE, TUPLE1, TUPLE2, REDUCE, BUILD = b"(", b"t", b"\x85", b"\x86", b"R", b"b"
EMPTY_DICT, SETITEM, SETITEMS, MEMOIZE, EMPTY_TUPLE, NEWOBJ = (
    b"}",
    b"s",
    b"u",
    b"\x94",
    b")",
    b"\x81",
)
NEWOBJ_EX, APPEND, EMPTY_LIST = b"\x92", b"a", b"]"


def binget(i: int) -> bytes:
    return b"h" + bytes([i])


def corpus(canary: str) -> dict[str, tuple[bytes, str]]:
    """name -> (pickle bytes, the global the output must name)."""
    sh = f"touch {canary}"
    py = f"open({canary!r}, 'w').close()"
    me = __name__
    return {
        "os_system_p0": (b"cos\nsystem\n(S'" + sh.encode() + b"'\ntR.", "os.system"),
        "posix_system_p4": (
            P4 + sg("posix", "system") + u(sh) + TUPLE1 + REDUCE + STOP,
            "posix.system",
        ),
        "subprocess_call": (
            P4
            + sg("subprocess", "call")
            + EMPTY_LIST
            + u("touch")
            + APPEND
            + u(canary)
            + APPEND
            + TUPLE1
            + REDUCE
            + STOP,
            "subprocess.call",
        ),
        "builtins_exec": (
            P4 + sg("builtins", "exec") + u(py) + TUPLE1 + REDUCE + STOP,
            "builtins.exec",
        ),
        "builtins_eval_p0": (
            b"c__builtin__\neval\n(V" + py.encode() + b"\ntR.",
            "__builtin__.eval",
        ),
        # getattr(__import__('os'), 'system')('touch ...')
        "getattr_chain": (
            P4
            + sg("builtins", "getattr")
            + sg("builtins", "__import__")
            + u("os")
            + TUPLE1
            + REDUCE
            + u("system")
            + TUPLE2
            + REDUCE
            + u(sh)
            + TUPLE1
            + REDUCE
            + STOP,
            "builtins.getattr",
        ),
        "inst": (b"(S'" + sh.encode() + b"'\nios\nsystem\n.", "os.system"),
        "obj": (b"(cos\nsystem\nS'" + sh.encode() + b"'\no.", "os.system"),
        "newobj": (P4 + sg(me, "Canary") + u(canary) + TUPLE1 + NEWOBJ + STOP, f"{me}.Canary"),
        "newobj_ex": (
            P4 + sg(me, "Canary") + u(canary) + TUPLE1 + EMPTY_DICT + NEWOBJ_EX + STOP,
            f"{me}.Canary",
        ),
        "build_setstate": (
            P4
            + sg(me, "Canary")
            + EMPTY_TUPLE
            + NEWOBJ
            + EMPTY_DICT
            + u("canary")
            + u(canary)
            + SETITEM
            + BUILD
            + STOP,
            f"{me}.Canary",
        ),
        # module and name come from the memo, the callable is used twice
        "stack_global_memo": (
            P4
            + u("os")
            + MEMOIZE
            + u("system")
            + MEMOIZE
            + binget(0)
            + binget(1)
            + b"\x93"
            + MEMOIZE
            + u(sh)
            + TUPLE1
            + REDUCE
            + b"0"
            + binget(2)
            + u(sh)
            + TUPLE1
            + REDUCE
            + STOP,
            "os.system",
        ),
        # a legit params dict with the payload in one leaf
        "deep_in_params": (
            P4
            + EMPTY_DICT
            + u("params")
            + EMPTY_DICT
            + u("dense")
            + EMPTY_DICT
            + MARK
            + u("kernel")
            + b"G"
            + struct.pack(">d", 1.0)
            + u("hook")
            + sg("os", "system")
            + u(sh)
            + TUPLE1
            + REDUCE
            + SETITEMS
            + SETITEM
            + SETITEM
            + STOP,
            "os.system",
        ),
        # jax's array reconstructor calls whatever function the file names
        "jax_reconstruct_fun": (
            P4
            + sg("jax._src.array", "_reconstruct_array")
            + MARK
            + sg("os", "system")
            + u(sh)
            + TUPLE1
            + EMPTY_TUPLE
            + EMPTY_DICT
            + TUPLE
            + REDUCE
            + STOP,
            "os.system",
        ),
        "copyreg_reconstructor": (
            P4
            + sg("copyreg", "_reconstructor")
            + sg(me, "Canary")
            + sg("builtins", "object")
            + b"N"
            + b"\x87"
            + REDUCE
            + EMPTY_DICT
            + u("canary")
            + u(canary)
            + SETITEM
            + BUILD
            + STOP,
            f"{me}.Canary",
        ),
        "pickle_in_pickle": (
            P4
            + sg("pickle", "loads")
            + b"C"
            + bytes([len(_inner(sh))])
            + _inner(sh)
            + TUPLE1
            + REDUCE
            + STOP,
            "pickle.loads",
        ),
    }


def _inner(sh: str) -> bytes:
    return b"cos\nsystem\n(S'" + sh.encode() + b"'\ntR."


@pytest.fixture
def canary(tmp_path):
    return str(tmp_path / "CANARY")


@pytest.mark.parametrize("name", sorted(corpus("x")))
def test_load_blocks(tmp_path, canary, name):
    data, blocked = corpus(canary)[name]
    f = tmp_path / f"{name}.pkl"
    f.write_bytes(data)
    r = tio.read(f)
    assert not os.path.exists(canary)
    assert blocked in r.blocked
    # the tree is a valid pytree for treetool's model: every node can be opened
    assert all(n.path is not None for n in tt.view(r.tree).walk())


def test_corpus_is_live(tmp_path):
    """The real unpickler runs every corpus file (so the corpus tests something)."""
    script = (
        "import pickle, sys, os\n"
        "sys.path.insert(0, os.path.dirname(sys.argv[1]))\n"
        "for f in sys.argv[2:]:\n"
        "    try:\n"
        "        pickle.load(open(f, 'rb'))\n"
        "    except Exception:\n"
        "        pass\n"
    )
    files = []
    for name in sorted(corpus("x")):
        c = str(tmp_path / f"CANARY_{name}")
        f = tmp_path / f"{name}.pkl"
        f.write_bytes(corpus(c)[name][0])
        files.append((name, c, str(f)))
    env = {
        **os.environ,
        "PYTHONPATH": os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    subprocess.run(
        [sys.executable, "-c", script, __file__, *[f for _, _, f in files]],
        env=env,
        cwd=os.path.dirname(__file__),
        check=True,
        timeout=60,
    )
    created = {name for name, c, _ in files if os.path.exists(c)}
    assert created == {name for name, _, _ in files}


def test_npz_object_array_payload(tmp_path, canary):
    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {canary}",))

    f = tmp_path / "evil.npz"
    np.savez(f, w=np.ones(3, np.float32), obj=np.array([Evil()], dtype=object))
    r = tio.read(f)
    assert not os.path.exists(canary)
    assert r.blocked == ["posix.system"]
    assert r.tree["w"].shape == (3,)
    assert r.tree["obj"].dtype == object and r.tree["obj"][0].class_path == "posix.system"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (P4 + b"\x82\x01" + STOP, "refused EXT1"),
        (P4 + b"\x83\x01\x00" + STOP, "refused EXT2"),
        (P4 + b"\x84\x01\x00\x00\x00" + STOP, "refused EXT4"),
        (P4 + b"Pfoo\n" + STOP, "refused PERSID"),
        (P4 + u("x") + b"Q" + STOP, "refused BINPERSID"),
        (b"\x80\x05\x97" + STOP, "refused NEXT_BUFFER"),
    ],
)
def test_refused_opcodes(tmp_path, data, message):
    f = tmp_path / "x.pkl"
    f.write_bytes(data)
    with pytest.raises(UnsafeError, match=message):
        tio.load(f)


def test_trust_runs_code(tmp_path, canary):
    f = tmp_path / "t.pkl"
    f.write_bytes(corpus(canary)["posix_system_p4"][0])
    tio.load(f, trust=True)
    assert os.path.exists(canary)


def test_zip_bomb_member_is_not_decompressed(tmp_path):
    # a member whose header claims a 4 GB array but whose real size says otherwise
    f = tmp_path / "bomb.npz"
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000,), }"
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    npy = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + b"\0" * 1000
    with zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("w.npy", npy)
    with pytest.raises(LoadError, match=r"w\.npy\]: member is \d+ bytes but its header says"):
        tio.load(f)


def test_pickle_protocol_roundtrip_of_corpus_names(tmp_path):
    # the plain pickle of a blocked function reference is a leaf naming it
    f = tmp_path / "ref.pkl"
    f.write_bytes(pickle.dumps({"fn": os.path.join}))
    r = tio.read(f)
    assert r.blocked == ["posixpath.join"]
    assert [str(p) for p, _ in tt.leaves_with_path(r.tree)] == ["['fn']"]
