"""Listing a checkpoint's structure imports neither numpy nor ml_dtypes nor jax.

`ls`, `ls --json`, `inspect --no-tui`, `inspect --json` and `summary` of safetensors (single and
sharded), npz, flax msgpack (single and sharded) and pickles of arrays (protocols 2 and 5) run
in a real subprocess whose exit fails if one of those modules was imported; their output is
pinned, and the facts listed are those numpy gives for the same files read by their own
libraries. The numpy-free descriptions of dtypes (`spec_facts`, the pickle reader's
`PlainDtype`, `.npy` headers) are checked against `np.dtype` by a hypothesis property.
"""

from __future__ import annotations

import functools
import io
import json
import os
import pickle
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from cli_runner import together
from hypothesis import given
from hypothesis import strategies as st
from import_guard import run_guarded

from treetool._errors import LoadError
from treetool._leaves._dtypes import spec_facts
from treetool._leaves._facts import leaf_info
from treetool._leaves._lazy_array import LazyArray
from treetool.io._pickle._numpy_rebuild import HostArray, listing
from treetool.io.npz import parse_npy_header
from treetool.io.pickle import read_pickle

#: the dtypes every format carries, with shapes: bf16, f32, i8, bool, u16, c64, f8e4m3fn
ARRAYS: dict[str, tuple[tuple[int, ...], Any]] = {
    "a": ((2, 3), ml_dtypes.bfloat16),
    "b": ((4,), np.float32),
    "c": ((5,), np.int8),
    "d": ((2,), np.bool_),
    "e": ((1, 3), np.uint16),
    "f": ((2,), np.complex64),
    "g": ((2, 2), ml_dtypes.float8_e4m3fn),
}
#: `ls` of ARRAYS (safetensors has no complex64)
LS = {
    "a": "[2, 3]\tbfloat16",
    "b": "[4]\tfloat32",
    "c": "[5]\tint8",
    "d": "[2]\tbool",
    "e": "[1, 3]\tuint16",
    "f": "[2]\tcomplex64",
    "g": "[2, 2]\tfloat8_e4m3fn",
}


def _arrays(skip: str = "") -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    out = {}
    for k, (shape, dt) in ARRAYS.items():
        if k not in skip:
            out[k] = (rng.standard_normal(shape) * 3).astype(dt)
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import safetensors.numpy as stn
    from flax.serialization import to_bytes

    root = tmp_path_factory.mktemp("nonumpy")
    out: dict[str, Path] = {}
    st_arrays = _arrays(skip="f")
    out["safetensors"] = root / "m.safetensors"
    stn.save_file(st_arrays, str(out["safetensors"]))
    shards = root / "sharded"
    shards.mkdir()
    weight_map = {}
    for i, keys in enumerate(("ac", "bdeg")):
        name = f"model-0000{i + 1}-of-00002.safetensors"
        stn.save_file({k: st_arrays[k] for k in keys}, str(shards / name))
        weight_map.update(dict.fromkeys(keys, name))
    out["sharded"] = shards / "model.safetensors.index.json"
    out["sharded"].write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    out["npz"] = root / "m.npz"
    np.savez(out["npz"], **_arrays())
    out["msgpack"] = root / "m.msgpack"
    out["msgpack"].write_bytes(to_bytes(_arrays()))
    mshards = root / "msharded"
    mshards.mkdir()
    index = {}
    for i, keys in enumerate(("abc", "defg")):
        name = f"flax_model-0000{i + 1}-of-00002.msgpack"
        (mshards / name).write_bytes(to_bytes({f"p/{k}": _arrays()[k] for k in keys}))
        index.update({f"p/{k}": name for k in keys})
    out["msgpack-sharded"] = mshards / "flax_model.msgpack.index.json"
    out["msgpack-sharded"].write_text(json.dumps({"metadata": {}, "weight_map": index}))
    # numpy scalars (a step count, a learning rate) next to arrays
    scalars = {"step": np.int64(7), "lr": np.float32(0.5), "bf": ml_dtypes.bfloat16(2)}
    out["msgpack-scalars"] = root / "scalars.msgpack"
    out["msgpack-scalars"].write_bytes(to_bytes({**scalars, "w": np.ones((3, 2), np.float32)}))
    out["pickle-scalars"] = root / "scalars.pkl"
    out["pickle-scalars"].write_bytes(pickle.dumps({**scalars, "w": np.ones(3, np.float32)}))
    for proto in (2, 5):
        # small arrays (held inline), a big one (in the file), a big-endian one
        tree = {
            "p": _arrays(),
            "big": np.ones((64, 32), np.float32),
            "be": np.arange(3, dtype=">i8"),
        }
        out[f"pickle{proto}"] = root / f"m{proto}.pkl"
        out[f"pickle{proto}"].write_bytes(pickle.dumps(tree, protocol=proto))
    return out


def _expected_ls(fmt: str) -> list[str]:
    if fmt in ("safetensors", "sharded"):
        return [f"['{k}']\t{v}" for k, v in LS.items() if k != "f"]
    if fmt == "npz":  # np.savez writes ml_dtypes arrays as raw bytes (void)
        void = {"a": "[2, 3]\tvoid16", "g": "[2, 2]\tvoid8"}
        return [f"['{k}']\t{void.get(k, v)}" for k, v in LS.items()]
    if fmt in ("msgpack", "msgpack-sharded"):
        prefix = "['p']" if fmt == "msgpack-sharded" else ""
        return [f"{prefix}['{k}']\t{v}" for k, v in LS.items()]
    return [  # in jax's order: dict keys sorted
        "['be']\t[3]\tint64",
        "['big']\t[64, 32]\tfloat32",
        *[f"['p']['{k}']\t{v}" for k, v in LS.items()],
    ]


FORMATS = ["safetensors", "sharded", "npz", "msgpack", "msgpack-sharded", "pickle2", "pickle5"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_ls_tree_and_json_import_no_numpy(fmt: str, files: dict[str, Path]) -> None:
    path = str(files[fmt])
    commands = [("ls",), ("ls", "--json"), ("inspect", "--no-tui"), ("inspect", "--json")]
    commands.append(("summary",))
    runs = together(  # independent guarded runs, side by side
        *(functools.partial(run_guarded, *args, path, cwd=files[fmt].parent) for args in commands)
    )
    ls = runs[0]
    assert (ls.returncode, ls.stderr) == (0, "")
    assert ls.stdout.splitlines() == _expected_ls(fmt)
    for args, out in zip(commands, runs):
        assert (out.returncode, out.stderr) == (0, ""), args
    listing_json = json.loads(runs[1].stdout)
    leaves = {leaf["path"]: leaf for leaf in listing_json["leaves"]}
    assert len(leaves) == len(_expected_ls(fmt))
    assert listing_json["totals"]["leaves"] == len(leaves)


def _numpy_facts(fmt: str, path: Path) -> dict[str, tuple[list[int], str, int]]:
    """{path: (shape, dtype name, nbytes)} of the file read by its own library, in numpy
    (safetensors' numpy reader knows no float8: the arrays written)."""
    from flax.serialization import msgpack_restore

    if fmt == "safetensors":
        flat = _arrays(skip="f")
    elif fmt == "npz":
        with np.load(path) as z:
            flat = {k: z[k] for k in z.files}
    elif fmt == "msgpack":
        flat = msgpack_restore(path.read_bytes())
    else:  # our own pickle: safe to load
        data = pickle.loads(path.read_bytes())
        flat = {
            "big": data["big"],
            "be": data["be"],
            **{f"p']['{k}": v for k, v in data["p"].items()},
        }
    return {f"['{k}']": (list(v.shape), v.dtype.name, v.nbytes) for k, v in flat.items()}


@pytest.mark.parametrize("fmt", ["safetensors", "npz", "msgpack", "pickle2", "pickle5"])
def test_listed_facts_are_numpys(fmt: str, files: dict[str, Path]) -> None:
    out = run_guarded("ls", "--json", str(files[fmt]), cwd=files[fmt].parent)
    assert out.returncode == 0, out.stderr
    listed = {
        leaf["path"]: (leaf["shape"], leaf["dtype"], leaf["nbytes"])
        for leaf in json.loads(out.stdout)["leaves"]
    }
    assert listed == _numpy_facts(fmt, files[fmt])


def test_pickled_arrays_list_as_the_arrays_they_are(files: dict[str, Path]) -> None:
    # an array held inline is listed as the numpy array tt.load makes (ndarray, on the host);
    # one in the file's bytes as a LazyArray; the big-endian one keeps its byte order
    for proto in (2, 5):
        out = run_guarded("ls", "--json", str(files[f"pickle{proto}"]), cwd=files["npz"].parent)
        leaves = {leaf["path"]: leaf for leaf in json.loads(out.stdout)["leaves"]}
        assert leaves["['p']['a']"] == {
            "path": "['p']['a']",
            "shape": [2, 3],
            "dtype": "bfloat16",
            "nbytes": 12,
            "device": "host",
            "type": "ndarray",
        }
        big = leaves["['big']"]
        assert (big["type"], big["device"]) == (
            ("LazyArray", "file") if proto == 5 else ("ndarray", "host")
        )
    with listing():
        tree = read_pickle(str(files["pickle2"])).tree
    be = tree["be"]
    assert type(be) is HostArray and be.dtype_name == "int64"
    assert np.asarray(be).dtype == np.dtype(">i8") and np.asarray(be).tolist() == [0, 1, 2]
    for k, arr in _arrays().items():
        assert np.asarray(tree["p"][k]).tobytes() == arr.tobytes()
        assert tree["p"][k].dtype == arr.dtype


def test_a_dtype_object_in_the_tree_is_numpys(tmp_path: Path) -> None:
    # a dtype the file puts in the tree itself (not as an array's) comes out as numpy's
    path = tmp_path / "dt.pkl"
    path.write_bytes(
        pickle.dumps({"dt": np.dtype(">f4"), "x": np.zeros(2, np.float32)}, protocol=2)
    )
    tree = read_pickle(str(path)).tree
    assert isinstance(tree["dt"], np.dtype) and tree["dt"] == np.dtype(">f4")
    assert type(tree["x"]) is np.ndarray and tree["x"].dtype == np.float32


# --- the numpy-free descriptions agree with numpy ---------------------------------------------

_DTYPES = [
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128,
    ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.int4,
]  # fmt: skip


@st.composite
def _arrays_st(draw: Any) -> np.ndarray:
    dt = np.dtype(draw(st.sampled_from(_DTYPES)))
    if draw(st.booleans()) and dt.kind in "iufc":
        dt = dt.newbyteorder(draw(st.sampled_from("<>")))
    shape = tuple(draw(st.lists(st.integers(0, 4), max_size=3)))
    arr = np.arange(int(np.prod(shape)), dtype=np.int64).astype(dt).reshape(shape)
    return np.asfortranarray(arr) if draw(st.booleans()) else arr


@given(_arrays_st(), st.integers(2, 5))
def test_pickled_arrays_read_without_numpy_are_numpys(arr: np.ndarray, proto: int) -> None:
    # read as tt.load reads it and as the listing commands do: the same facts, numpy's
    big = np.zeros(1100, arr.dtype)
    data = pickle.dumps({"x": arr, "big": big}, protocol=proto)
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"tt-prop-{os.getpid()}.pkl"
    path.write_bytes(data)
    try:
        tree = read_pickle(str(path)).tree
        with listing():
            listed = read_pickle(str(path)).tree
        for k, want in (("x", arr), ("big", big)):
            info = leaf_info(tree[k])
            assert leaf_info(listed[k]) == info  # kind, type, device, dtype, shape, bytes
            assert (info.dtype, info.shape) == (want.dtype.name, want.shape)
            assert info.nbytes == leaf_info(want).nbytes  # (int4 counts its real 4 bits)
            for got in (tree[k], listed[k]):
                assert got.dtype == want.dtype  # byte order included
                assert np.asarray(got).tobytes(order="A") == want.tobytes(order="A")
    finally:
        path.unlink()


@given(_arrays_st())
def test_npy_headers_read_without_numpy_are_numpys(arr: np.ndarray) -> None:
    # the oracle: numpy's own reading of the same header (ml_dtypes arrays are written as
    # raw bytes, `<V2`; float8_e5m2 as `<f1`, which numpy cannot read back either)
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr)
    fmt = np.lib.format
    buf.seek(0)
    major, _ = fmt.read_magic(buf)
    read_header = fmt.read_array_header_1_0 if major == 1 else fmt.read_array_header_2_0
    try:
        shape, fortran, dt = read_header(buf)
    except (ValueError, TypeError):
        buf.seek(0)
        with pytest.raises(LoadError, match="unsupported dtype"):
            parse_npy_header(buf, "x.npy")
        return
    buf.seek(0)
    hdr = parse_npy_header(buf, "x.npy")
    assert (hdr.name, hdr.itemsize, hdr.nbytes) == (dt.name, dt.itemsize, arr.nbytes)
    assert (hdr.shape, hdr.fortran_order) == (shape, fortran)
    assert np.dtype(hdr.dtype) == dt
    lazy = LazyArray(hdr.shape, hdr.dtype, "x.npy", fortran_order=hdr.fortran_order)
    assert (lazy.dtype_name, lazy.dtype) == (dt.name, dt)


@given(
    st.sampled_from("<>|="),
    st.sampled_from(
        [
            "b1",
            "i1",
            "i2",
            "i4",
            "i8",
            "u1",
            "u2",
            "u4",
            "u8",
            "f2",
            "f4",
            "f8",
            "c8",
            "c16",
            "V1",
            "V2",
            "V16",
            "?",
        ]
    ),
)
def test_spec_facts_are_numpys(order: str, descr: str) -> None:
    spec = order + descr
    dt = np.dtype(spec)
    assert spec_facts(spec) == (dt.name, dt.itemsize)
    for name in ("bfloat16", "float8_e4m3fn", "float8_e5m2", "int4", "uint4", "float4_e2m1fn"):
        ml = np.dtype(getattr(ml_dtypes, name))
        assert spec_facts(name) == (ml.name, ml.itemsize)


@given(st.sampled_from(_DTYPES), st.integers(2, 5))
def test_pickled_scalars_listed_without_numpy_are_numpys(dtype: Any, proto: int) -> None:
    # a numpy scalar (a step count, a learning rate) lists as the scalar it is
    want = np.array([3], dtype)[0]
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"tt-scalar-{os.getpid()}.pkl"
    path.write_bytes(pickle.dumps({"s": want}, protocol=proto))
    try:
        got = read_pickle(str(path)).tree["s"]
        with listing():
            listed = read_pickle(str(path)).tree["s"]
    finally:
        path.unlink()
    assert type(got) is type(want) and got == want
    assert leaf_info(listed) == leaf_info(got) == leaf_info(want)
    assert np.asarray(listed).reshape(())[()] == want and listed.dtype == want.dtype


def test_ls_of_pickled_scalars_and_jax_arrays_imports_no_numpy(tmp_path: Path) -> None:
    import jax.numpy as jnp

    tree = {"w": jnp.ones((64, 64)), "b": jnp.zeros(3), "step": np.int64(5), "lr": np.float32(0.1)}
    (tmp_path / "state.pkl").write_bytes(pickle.dumps(tree))
    out = run_guarded("ls", "--json", "state.pkl", cwd=tmp_path)
    assert (out.returncode, out.stderr) == (0, "")
    leaves = [(x["path"], x["type"], x["device"]) for x in json.loads(out.stdout)["leaves"]]
    assert leaves == [
        ("['b']", "ndarray", "host"),
        ("['lr']", "float32", "host"),
        ("['step']", "int64", "host"),
        ("['w']", "LazyArray", "file"),
    ]


def test_a_pickle_is_read_once(files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    # the reader's own objects are gone after a read (no cycle keeps them, even with the
    # collector paused as treetool.io.read pauses it): a dtype is found in the tree only
    # when the file put it there, and only then is the file read again
    import treetool.io as tio
    import treetool.io._pickle._numpy_rebuild as nr

    seen: list[bool] = []
    real = nr.plain_escaped
    monkeypatch.setattr(nr, "plain_escaped", lambda: seen.append(real()) or seen[-1])
    for proto in (2, 5):
        tio.read(str(files[f"pickle{proto}"]))
        with listing():
            tio.read(str(files[f"pickle{proto}"]))
    assert seen == [False] * 4


@pytest.mark.parametrize(
    "fmt", ["pickle2", "pickle5", "pickle-scalars", "msgpack-scalars", "npz", "safetensors"]
)
def test_listing_without_numpy_prints_what_the_loaded_tree_gives(
    fmt: str, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # byte for byte: `ls --json` and `summary --json` (no numpy) against the same JSON made
    # in this process from the tree treetool.io.read gives (numpy arrays held in memory)
    import treetool.io as tio
    from treetool._cli._json import _json_listing, _print_json
    from treetool._summary._summary import summary

    tree = tio.read(str(files[fmt])).tree
    capsys.readouterr()
    _print_json(_json_listing(tree, tio.detect(str(files[fmt])), None))
    listing_text = capsys.readouterr().out
    _print_json(summary(tree, depth=1).to_dict())
    summary_text = capsys.readouterr().out
    for args, want in ((("ls", "--json"), listing_text), (("summary", "--json"), summary_text)):
        out = run_guarded(*args, str(files[fmt]), cwd=files[fmt].parent)
        assert (out.returncode, out.stderr) == (0, "")
        assert out.stdout == want


def test_ls_of_an_orbax_checkpoint_imports_no_numpy(tmp_path: Path) -> None:
    """An orbax checkpoint (its OCDBT database decoded by treetool, dtypes passed by name)
    lists every dtype orbax writes without numpy, tensorstore or jax in the process."""
    import orbax.checkpoint as ocp

    tree = {"layer": _arrays()}
    with ocp.StandardCheckpointer() as ckptr:
        ckptr.save(tmp_path / "ckpt", tree)
    ls = run_guarded("ls", str(tmp_path / "ckpt"), cwd=tmp_path)
    assert (ls.returncode, ls.stderr) == (0, "")
    assert ls.stdout.splitlines() == [f"['layer']['{k}']\t{v}" for k, v in LS.items()]
    for args in (("ls", "--json"), ("summary",)):
        out = run_guarded(*args, str(tmp_path / "ckpt"), cwd=tmp_path)
        assert (out.returncode, out.stderr) == (0, ""), args


_HALF_IMPORTED = """
import sys, threading
from treetool._leaves._dtypes import loaded_numpy
half, whole, done = [0], [0], threading.Event()
def watch():
    while not done.is_set():
        np = loaded_numpy()
        if np is None and "numpy" in sys.modules:
            half[0] += 1  # numpy half-built by the other thread: not offered
        elif np is not None:
            np.frombuffer, np.ndarray  # what a reader takes from it: must be there
            whole[0] += 1
t = threading.Thread(target=watch)
t.start()
import numpy
done.set()
t.join()
print(half[0] > 0, whole[0] >= 0)
"""


def test_numpy_half_imported_by_another_thread_is_not_offered() -> None:
    """While one thread imports numpy, another thread asking `loaded_numpy()` gets None, not
    the half-built module (a reader took `np.frombuffer` from it and failed, when a remote
    diff read both sides at once)."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _HALF_IMPORTED], capture_output=True, text=True, timeout=60
    )
    assert (out.returncode, out.stderr, out.stdout.split()) == (0, "", ["True", "True"])
