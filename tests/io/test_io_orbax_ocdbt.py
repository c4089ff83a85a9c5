"""The OCDBT metadata of orbax checkpoints, decoded by treetool itself (no tensorstore import):
the same bytes as tensorstore's own walk, the same tree, values still read by tensorstore,
and hostile databases refused in one line."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import treetool.io as tio
from treetool import LoadError
from treetool.io._orbax._ocdbt import _ocdbt_read_metadata, _OcdbtWalk, decoded_metadata
from treetool.io.orbax import OrbaxArray

orbax = pytest.importorskip("orbax.checkpoint")
ts = pytest.importorskip("tensorstore")
from hostile.harness import assert_contained, run_cli  # noqa: E402

_ORBAX_MODULES = ["orbax", "_orbax/_tree", "_orbax/_fs", "_orbax/_data", "_orbax/_array"]
_ORBAX_MODULES += ["_orbax/_ocdbt", "_orbax/_ocdbt_decode"]


@pytest.fixture(scope="module")
def tree() -> dict:
    return {
        "params": {
            "w": jnp.arange(12.0).reshape(3, 4),
            "b": jnp.ones(5, jnp.bfloat16),
            "h": jnp.zeros((2, 2), jnp.float16),
        },
        "ints": [jnp.arange(3, dtype=jnp.int8), np.arange(4, dtype=np.uint32)],
        "mask": np.array([True, False]),
        "c": np.array([1 + 2j], dtype=np.complex64),
        "f8": np.zeros(3, dtype=ml_dtypes.float8_e4m3fn),
        "scalar": jnp.float32(2.5),
    }


@pytest.fixture(scope="module")
def item(tmp_path_factory: pytest.TempPathFactory, tree: dict) -> Path:
    d = tmp_path_factory.mktemp("ocdbt") / "ck"
    with orbax.StandardCheckpointer() as ck:
        ck.save(d, tree)
    return d


def _facts(t: object) -> list[tuple[str, tuple, str]]:
    return [
        (jax.tree_util.keystr(p), tuple(x.shape), np.dtype(x.dtype).name)
        for p, x in jax.tree_util.tree_flatten_with_path(t)[0]
    ]


def test_decoded_metadata_is_tensorstores(item: Path) -> None:
    ours = decoded_metadata(str(item))
    assert ours == _OcdbtWalk.start(str(item)).metadata()
    assert sorted(ours) == [
        "c", "f8", "ints.0", "ints.1", "mask", "params.b", "params.h", "params.w", "scalar",
    ]  # fmt: skip
    assert json.loads(ours["params.w"])["shape"] == [3, 4]
    assert json.loads(ours["params.b"])["dtype"] == "bfloat16"


def test_tree_shapes_dtypes_and_values(item: Path, tree: dict) -> None:
    t = tio.read(item).tree
    assert _facts(t) == [
        ("['c']", (1,), "complex64"),
        ("['f8']", (3,), "float8_e4m3fn"),
        ("['ints'][0]", (3,), "int8"),
        ("['ints'][1]", (4,), "uint32"),
        ("['mask']", (2,), "bool"),
        ("['params']['b']", (5,), "bfloat16"),
        ("['params']['h']", (2, 2), "float16"),
        ("['params']['w']", (3, 4), "float32"),
        ("['scalar']", (), "float32"),
    ]
    assert _facts(t) == _facts(tree)
    w = t["params"]["w"]
    assert isinstance(w, OrbaxArray) and w.file == f"{item}/params.w"
    assert w.spec()["kvstore"]["path"] == "params.w/"  # where its bytes live, still right
    assert np.array_equal(np.asarray(w), np.arange(12.0).reshape(3, 4))
    assert np.asarray(t["scalar"]).tolist() == 2.5


@pytest.mark.slow
def test_structure_imports_no_tensorstore_values_do(item: Path) -> None:
    code = (
        "import sys, treetool.io as tio, numpy as np\n"
        f"t = tio.read({str(item)!r}).tree\n"
        "print(t['params']['w'].shape, 'tensorstore' in sys.modules, 'asyncio' in sys.modules)\n"
        "print(np.asarray(t['params']['w']).sum(), 'tensorstore' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["(3, 4) False False", "66.0 True"]


@pytest.mark.slow
def test_ls_is_the_same_with_the_tensorstore_walk(item: Path, monkeypatch) -> None:
    """`ls` lines from the decoder equal those of tensorstore's walk (decoder switched off)."""
    run = run_cli("ls", str(item), cwd=item.parent)
    assert run.rc == 0, run.stderr
    assert run.stdout.splitlines()[:2] == ["['c']\t[1]\tcomplex64", "['f8']\t[3]\tfloat8_e4m3fn"]
    from treetool.io import orbax as orbax_reader

    ours = _facts(tio.read(item).tree)
    walked: list[str] = []
    real_walk = orbax_reader._OcdbtWalk.start
    monkeypatch.setattr(orbax_reader, "decoded_metadata", lambda item: None)
    monkeypatch.setattr(
        orbax_reader._OcdbtWalk, "start", lambda item: walked.append(item) or real_walk(item)
    )
    assert _facts(tio.read(item).tree) == ours
    assert walked == [str(item)]  # the tree above came from tensorstore's walk


def test_orbax_modules_import_no_numpy_tensorstore_or_jax_at_top_level() -> None:
    root = Path(tio.__file__).parent
    for name in _ORBAX_MODULES:
        body = ast.parse((root / f"{name}.py").read_text()).body
        top = set()
        for node in body:
            if isinstance(node, ast.Import):
                top |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                top.add(node.module.split(".")[0])
        assert not top & {"numpy", "tensorstore", "jax", "ml_dtypes"}, (name, top)


def test_interior_nodes_and_indirect_values(tmp_path: Path) -> None:
    """A B+tree several levels deep with metadata stored out of line: the decoder and the
    tensorstore walk (its fallback) read the same bytes as tensorstore's key-by-key reads,
    for every array and nothing else."""
    spec = {
        "driver": "ocdbt",
        "base": f"file://{tmp_path}/",
        "config": {"max_inline_value_bytes": 64, "max_decoded_node_bytes": 512},
    }
    kv = ts.KvStore.open(spec).result()
    txn = ts.Transaction()
    names = [f"layer{i:02d}.w" for i in range(40)] + ["z"]
    for i, name in enumerate(names):
        meta = b'{"shape": [%d], "dtype": "<f4"}' % i
        if i % 3 == 0:
            meta = meta[:-1] + b', "pad": "' + b"x" * 80 + b'"}'
        kv.with_transaction(txn)[f"{name}/.zarray".encode()] = meta
        kv.with_transaction(txn)[f"{name}/0".encode()] = b"\0" * 4 * i
    txn.commit_async().result()
    manifest = ts.ocdbt.dump(ts.KvStore.open(f"file://{tmp_path}/").result()).result()
    assert manifest["versions"][-1]["root_height"] >= 2

    got = decoded_metadata(str(tmp_path))
    assert got == _ocdbt_read_metadata(ts, str(tmp_path))
    assert got == _OcdbtWalk.start(str(tmp_path)).metadata()
    assert sorted(got) == sorted(names)
    assert got["layer07.w"] == b'{"shape": [7], "dtype": "<f4"}'
    assert got["layer03.w"].endswith(b'"' + b"x" * 80 + b'"}')


def test_array_names_with_odd_keys_are_tensorstores(tmp_path: Path) -> None:
    """Names are decoded all at once, each key's `/.zarray` or `/zarr.json` dropped: a name
    that itself ends in one of them, an empty name, UTF-8, a NUL (decoded one by one), and
    equal metadata texts in a row (handed out as one bytes object), as tensorstore reads."""
    kv = ts.KvStore.open({"driver": "ocdbt", "base": f"file://{tmp_path}/"}).result()
    txn = ts.Transaction()
    same = b'{"shape": [2], "dtype": "<f4"}'
    keys = {
        b"q/zarr.json/.zarray": same,
        b"a/.zarray/zarr.json": b'{"shape": [3], "data_type": "int8"}',
        b"/.zarray": same,
        b"b/.zarray": same,
        "\u00e9t\u00e9/.zarray".encode(): same,
        b"w/.zarray": b'{"shape": [2], "dtype": "<f4"} ',
        b"x/0": b"\0" * 8,
        b"y/.zarrayy": same,
    }
    for key, value in keys.items():
        kv.with_transaction(txn)[key] = value
    txn.commit_async().result()
    got = decoded_metadata(str(tmp_path))
    assert got == _ocdbt_read_metadata(ts, str(tmp_path))
    assert sorted(got) == ["", "a/.zarray", "b", "q/zarr.json", "w", "\u00e9t\u00e9"]
    assert got["q/zarr.json"] == same and got["w"] == same + b" "
    assert got["q/zarr.json"] is got["b"]  # equal texts in a row: one object
    kv[b"n\0ul/.zarray"] = same
    got = decoded_metadata(str(tmp_path))
    assert got == _ocdbt_read_metadata(ts, str(tmp_path)) and got["n\0ul"] == same


def _zarray(i: int) -> bytes:
    meta = {"shape": [i + 1, 2], "dtype": "<f4" if i % 2 else "|i1", "zarr_format": 2}
    return json.dumps(meta, separators=(",", ":")).encode()


def _six_arrays(kv: Any, txn: Any) -> None:
    for i in range(6):
        kv.with_transaction(txn)[f"p{i}.w/.zarray".encode()] = _zarray(i)
        kv.with_transaction(txn)[f"p{i}.w/0.0".encode()] = bytes(8)


def test_a_leaf_whose_keys_share_their_directory(tmp_path: Path) -> None:
    """Nodes of two keys each (`p3.w/.zarray`, `p3.w/0.0`): the leaf's keys are `.zarray`
    and `0.0`, the `p3.w/` is the prefix its parents give it; every array is still found."""
    spec = {
        "driver": "ocdbt",
        "base": f"file://{tmp_path}/",
        "config": {"max_inline_value_bytes": 0, "max_decoded_node_bytes": 160},
    }
    kv = ts.KvStore.open(spec).result()
    txn = ts.Transaction()
    _six_arrays(kv, txn)
    txn.commit_async().result()
    got = decoded_metadata(str(tmp_path))
    assert got == _ocdbt_read_metadata(ts, str(tmp_path))
    assert got == {f"p{i}.w": _zarray(i) for i in range(6)}


def test_manifest_kinds(tmp_path: Path) -> None:
    """The manifest kind is the byte after the uuid: 1 (numbered manifests, the versions in
    other files) is left to tensorstore's walk, a kind the format does not define is one
    line."""
    spec = {
        "driver": "ocdbt",
        "base": f"file://{tmp_path}/",
        "config": {"manifest_kind": "numbered", "compression": None},
    }
    kv = ts.KvStore.open(spec).result()
    kv[b"a/.zarray"] = _zarray(0)
    manifest = tmp_path / "manifest.ocdbt"
    blob = manifest.read_bytes()
    assert blob[13] == 0 and blob[30] == 1  # uncompressed; after the uuid, kind 1
    assert decoded_metadata(str(tmp_path)) is None
    assert _OcdbtWalk.start(str(tmp_path)).metadata() == {"a": _zarray(0)}
    manifest.write_bytes(blob[:30] + b"\x02" + blob[31:])
    with pytest.raises(LoadError, match=r": the OCDBT database: manifest kind 2, expected 0 or 1$"):
        decoded_metadata(str(tmp_path))


#: OCDBT databases written by tensorstore 0.1.35, the last release before the layout of
#: 0.1.36 (a length and a CRC-32C around every manifest and node, `manifest_kind` in the
#: configuration, data file tables): the six arrays of `_six_arrays`, in one transaction,
#: with `max_decoded_node_bytes` 160 (a B+tree four levels high) and `max_inline_value_bytes`
#: 0 (every value stored out of line) or 100 (the metadata inline). The files, packed as
#: (name length, name, size, bytes), zlib-compressed, base85.
_TENSORSTORE_0_1_35 = {
    0: (
        "c-mu7O3^nmNHR~fut+jYNi(-FN=-CMHn1=;NHsA^OHDRRHZx&hU~#EdD$YnONL8|mHq<eS)lo_*sRZ$qYBCL#bd;"
        "(Ri;CjY@{4j4OO&jPY8jvap~(nElTDflF`A6YvB`uSn@q{E$&7fLcy24)V_?+Ss{dEPIF^yYgo%NPft^_oq&l(EK"
        "+hmrP+|LuZrSfmuXH#Zp6I`kNny}sWROg;V<cUtX%dD`lT=0q7s5KTrZZw_HO*yY2qCO>KI0j(^<H6YWFl8@C(|}"
        "ey`E<o8NM(vGO@5QaB~~zmFq)IFhtkAkLd@Kl@${Zo0>8)q%FD{&B=_*93zA|#^~m3Vt&hPZNtQ5Z9~``6NEXY=;"
        "o|sdCFn~G{*+JIo@{}8AO<wn1Bfi#a~9~<}74=$?D<3!m@{PKVw!F7L(Kr85w}#hU^%0Gd8k$upD5_Lek{>7MT8+"
        "nVA?F8F{!1knA@>*ZY(0FuRv22g_0BuZ&k1!45bYoyf$%mz$WEnU-2yqL-hXl2iipM+VPrD=nz`d1sjzzOc-$*wa"
        ">6_&BKR{12_O$qnTU3m91#L3s!mfDFtG=vMt_{K5X8(T9PDp^c4UACp==58oo7a&;)pz%0PfqH=AnFaWGqdT0"
    ),
    100: (
        "c-mu7O3^nrw=^_ONlY^|HZwF$OfpS2O*J<+wKOtMvrJ7%Hcnz-V4lZwTj3r9qsCVKzY1=KObiT64D8H$Rf$DKiIo"
        "O=22ldlO2rw81*u9_(S|xku{ugAC6yqaQcb3zl8zEcVSHMCQEp<1l9f>{0~8Q%s1b^xHfbi*Fw~e9E;XTrOHFCvQ"
        "Zuq#>b{qe;R+KY6AKFiH@AUaxjxiz!}5u->xC1ewjO<6I;no%9czZr&`>6(&`^*Q(iUBf=43`P#q%s9!xxw-MhH`"
        "k(M?&!_@9wjb4(ECn4+6=g=r--9&^0!GBSuTGXcX3)mKL7=KNzm!s6z^!t#Of6C+lW)C?IJm>3z59fNL0532_YP&"
        "bk$pQnrrD$LAGjEsyt+yzMXn_&2Zbsn3SDF@3MmgP(k`;SH^GBNPwCgx?Pr52ay<tL{kl>ohw&U4#J3u=7sQ6`2b"
        "ELLA%K2m7yf4U{1U-Y7q{;re-j4X_x*ae0k12Y4<P5&7$v;AlEX5e9%$Iig;w~L2w5m5C%D9ykuz|f*{ZLTl?$qz"
        "(?"
    ),
}


def _unpack(packed: str, dest: Path) -> Path:
    import base64
    import zlib

    raw = zlib.decompress(base64.b85decode(packed))
    pos = 0
    while pos < len(raw):
        n = int.from_bytes(raw[pos : pos + 2], "big")
        name = raw[pos + 2 : pos + 2 + n].decode()
        size = int.from_bytes(raw[pos + 2 + n : pos + 6 + n], "big")
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_bytes(raw[pos + 6 + n : pos + 6 + n + size])
        pos += 6 + n + size
    return dest


@pytest.mark.parametrize("inline", [0, 100])
@pytest.mark.slow
def test_databases_of_tensorstore_0_1_35_are_read(tmp_path: Path, inline: int) -> None:
    """The old layout is told by its header (magic, then version and compression bytes: no
    length), and read as it was written; with `max_inline_value_bytes` 0, read as the new
    layout, its first byte would pass for manifest kind 0. Current tensorstore no longer
    reads these databases; their structure still lists."""
    item = _unpack(_TENSORSTORE_0_1_35[inline], tmp_path / "ck")
    assert (item / "manifest.ocdbt").read_bytes()[4:6] in (b"\0\0", b"\0\1")
    assert decoded_metadata(str(item)) == {f"p{i}.w": _zarray(i) for i in range(6)}
    entries = {
        f"('p{i}', 'w')": {
            "key_metadata": [{"key": f"p{i}", "key_type": 2}, {"key": "w", "key_type": 2}],
            "value_metadata": {"value_type": "np.ndarray", "skip_deserialize": False},
        }
        for i in range(6)
    }
    (item / "_METADATA").write_text(json.dumps({"tree_metadata": entries, "use_ocdbt": True}))
    run = run_cli("ls", str(item), cwd=tmp_path)
    assert run.rc == 0, run.stderr
    assert run.stdout.splitlines() == [
        f"['p{i}']['w']\t[{i + 1}, 2]\t{'float32' if i % 2 else 'int8'}" for i in range(6)
    ]


def test_empty_database(tmp_path: Path) -> None:
    kv = ts.KvStore.open({"driver": "ocdbt", "base": f"file://{tmp_path}/"}).result()
    kv[b"a"] = b"1"
    del kv[b"a"]
    assert decoded_metadata(str(tmp_path)) == {}


def _copy(item: Path, dest: Path) -> Path:
    import shutil

    shutil.copytree(item, dest)
    return dest


def _node_file(item: Path) -> Path:
    """The data file that holds the root B+tree node (the one the item's manifest names)."""
    (node,) = (item / "d").iterdir()
    return node


@pytest.mark.parametrize(
    ("target", "edit", "message"),
    [
        ("manifest", lambda b: b"\x00" + b[1:], "manifest has magic 0x00db3a2a, expected"),
        ("manifest", lambda b: b[:-9], "manifest says"),
        ("manifest", lambda b: b[:14] + bytes(len(b) - 14), "bad zstd data"),
        ("node", lambda b: b"", "expected, 0 there"),
        ("node", lambda b: bytes(len(b)), "B+tree node has magic 0x00000000"),
    ],
)
@pytest.mark.slow
def test_hostile_databases_are_one_line(item, tmp_path, target, edit, message) -> None:
    bad = _copy(item, tmp_path / "bad")
    f = bad / "manifest.ocdbt" if target == "manifest" else _node_file(bad)
    f.write_bytes(edit(f.read_bytes()))
    with pytest.raises(LoadError, match=re.escape(message)) as e:
        tio.read(bad)
    assert "\n" not in str(e.value)
    run = run_cli("ls", str(bad), cwd=tmp_path)
    assert_contained(run, rc=2)
    assert run.stderr.startswith(f"treetool: error: {bad}")


def test_random_corruption_raises_only_load_error(item: Path, tmp_path: Path) -> None:
    """Bytes flipped anywhere in the manifest or the node file: a tree or one LoadError."""
    rng = np.random.default_rng(0)
    bad = _copy(item, tmp_path / "bad")
    files = [bad / "manifest.ocdbt", _node_file(bad)]
    originals = [f.read_bytes() for f in files]
    trees, errors = 0, []
    for trial in range(60):
        k = trial % 2
        data = bytearray(originals[k])
        for pos in rng.integers(0, len(data), size=1 + trial % 4):
            data[pos] = int(rng.integers(0, 256))
        files[k].write_bytes(bytes(data))
        try:
            decoded_metadata(str(bad))
            trees += 1
        except LoadError as e:
            errors.append(str(e))
        files[k].write_bytes(originals[k])
    assert errors and trees + len(errors) == 60
    assert all("\n" not in e and e.startswith(f"{bad}") for e in errors)


def test_a_data_file_link_out_of_the_item_is_refused(item: Path, tmp_path: Path) -> None:
    bad = _copy(item, tmp_path / "bad")
    node = _node_file(bad)
    outside = tmp_path / "outside"
    node.rename(outside)
    node.symlink_to(outside)
    with pytest.raises(LoadError, match="a link to outside the checkpoint"):
        decoded_metadata(str(bad))


def test_tui_details_of_an_orbax_leaf(item: Path) -> None:
    """The details pane of a leaf read with the decoder: its facts, where its bytes live, and
    its stats (read through tensorstore by the pane's worker)."""
    import asyncio
    import io

    from rich.console import Console
    from treetool.tui import TreetoolApp
    from treetool.tui.widgets import DetailsPane

    tree = tio.read(item).tree

    async def main() -> str:
        app = TreetoolApp(tree, title=str(item))
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await app.workers.wait_for_complete()
            details = app.query_one(DetailsPane)
            details.show(app.model.child("params").child("w"))
            await pilot.pause()
            await app.workers.wait_for_complete()
            await pilot.pause(0.1)
            console = Console(width=200, file=io.StringIO(), color_system=None)
            for part in ("#details-path", "#details-facts", "#details-stats"):
                console.print(details.query_one(part).content)
            await pilot.press("q")
            return console.file.getvalue()

    lines = [line.rstrip() for line in asyncio.run(main()).splitlines()]
    assert lines[lines.index("['params']['w']") + 1 : lines.index("stats") + 5] == [
        "type      treetool.io._orbax._array.OrbaxArray",
        "shape     (3, 4)",
        "dtype     float32",
        "params    12",
        "bytes     48",
        "device    file",
        "PRNG key  no",
        f"file      {item}/params.w @ 0 (read on demand)",
        "stats",
        "min    0",
        "max    11",
        "mean   5.5",
        "std    3.45205",
    ]


def test_a_node_that_decodes_past_its_budget_is_one_line(item: Path, monkeypatch) -> None:
    from treetool.io._orbax import _ocdbt_decode as _ocdbt_decode

    node = _node_file(item).read_bytes()
    monkeypatch.setattr(_ocdbt_decode, "_MAX_DECODED", len(node))  # nodes decode to more
    with pytest.raises(LoadError, match=f"a node that decodes to more than {len(node)} bytes"):
        decoded_metadata(str(item))


def test_ranges_that_share_bytes_are_refused(tmp_path: Path) -> None:
    """B+tree nodes and values never overlap: a database whose references do (a node read
    over and over through shifted ranges) is refused before the second read."""
    from treetool.io._orbax import _ocdbt_decode as _ocdbt_decode

    reads: list[list[tuple[str, int, int]]] = []
    checked = _ocdbt_decode._checked(lambda r: reads.append(r) or [b""] * len(r), str(tmp_path))
    checked([("d/a", 0, 10), ("d/b", 0, 10)])
    checked([("d/a", 10, 5)])
    with pytest.raises(_ocdbt_decode._Bad, match=r"d/a: bytes 10-15 and 14-20 overlap"):
        checked([("d/a", 14, 6)])
    with pytest.raises(_ocdbt_decode._Bad, match="leaves the checkpoint"):
        checked([("../outside", 0, 1)])
    assert reads == [[("d/a", 0, 10), ("d/b", 0, 10)], [("d/a", 10, 5)]]


@pytest.mark.parametrize(
    "zarr",
    ["<f4", ">f4", "|b1", "<i8", "=i2", "<c16", "bfloat16", "float32", "float8_e4m3fn", "int4",
     "<U10", "<M8[ns]"],
)  # fmt: skip
def test_zarr_dtype_spellings_resolve_as_numpy_reads_them(zarr: str) -> None:
    """Standard spellings become numpy's names without numpy (`ITEMSIZES`, `spec_facts`);
    every other one comes from numpy or ml_dtypes as before, spelled so that `_as_dtype`
    gives back the very same dtype."""
    from treetool._leaves._dtypes import ITEMSIZES, _as_dtype
    from treetool.io.orbax import _dtype

    try:
        want = np.dtype(zarr)
    except TypeError:
        want = np.dtype(getattr(ml_dtypes, zarr))
    got = _as_dtype(_dtype(zarr, "item", "p"))
    assert (got, got.str) == (want, want.str)
    assert (_dtype(zarr, "item", "p") in ITEMSIZES) == (
        zarr in {"<f4", "|b1", "<i8", "=i2", "<c16", "bfloat16", "float32", "float8_e4m3fn", "int4"}
    )
