"""orbax checkpoint directories: tree, shapes, dtypes and shardings from metadata only."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import treetool.io as tio
from treetool import LoadError
from treetool.io._safety._limits import MAX_DEPTH
from treetool.io.orbax import OrbaxArray

orbax = pytest.importorskip("orbax.checkpoint")


@pytest.fixture(scope="module")
def tree():
    return {
        "params": {
            "dense": {"kernel": jnp.arange(6.0).reshape(2, 3), "bias": jnp.zeros(3, jnp.bfloat16)}
        },
        "lst": [jnp.ones(2, jnp.int32), None],
        "np": np.arange(4, dtype=np.int8),
    }


def _facts(t):
    return [
        (jax.tree_util.keystr(p), x.shape, np.dtype(x.dtype))
        for p, x in jax.tree_util.tree_flatten_with_path(t)[0]
    ]


@pytest.fixture(scope="module")
def standard(tmp_path_factory, tree):
    d = tmp_path_factory.mktemp("orbax") / "ck"
    ck = orbax.StandardCheckpointer()
    ck.save(d, tree)
    ck.wait_until_finished()
    return d


def test_standard_checkpoint(standard, tree):
    r = tio.read(standard)
    assert r.format == "orbax"
    assert _facts(r.tree) == _facts(tree)
    k = r.tree["params"]["dense"]["kernel"]
    assert isinstance(k, OrbaxArray) and k.sharding["sharding_type"] == "SingleDeviceSharding"
    assert np.array_equal(np.asarray(k), np.arange(6.0).reshape(2, 3))


def test_checkpoint_manager_latest_step(tmp_path, tree):
    mgr = orbax.CheckpointManager(tmp_path / "mgr")
    for step in (1, 7):
        mgr.save(
            step,
            args=orbax.args.StandardSave(jax.tree_util.tree_map(lambda x, s=step: x * s, tree)),
        )
    mgr.wait_until_finished()
    t = tio.load(tmp_path / "mgr")
    assert _facts(t) == _facts(tree)
    assert np.array_equal(np.asarray(t["np"]), np.arange(4, dtype=np.int8) * 7)


def test_sharded_checkpoint(tmp_path):
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("x", "y"))
    x = jax.device_put(jnp.arange(32.0).reshape(4, 8), NamedSharding(mesh, P("x", "y")))
    ck = orbax.StandardCheckpointer()
    ck.save(tmp_path / "ck", {"x": x})
    ck.wait_until_finished()
    leaf = tio.load(tmp_path / "ck")["x"]
    assert (leaf.shape, leaf.dtype) == ((4, 8), np.dtype("float32"))
    assert leaf.sharding["sharding_type"] == "NamedSharding" and leaf.sharding[
        "partition_spec"
    ] == ["x", "y"]
    assert np.array_equal(np.asarray(leaf), np.arange(32.0).reshape(4, 8))


def test_plain_directory_is_refused(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(LoadError, match="not an orbax checkpoint"):
        tio.load(tmp_path / "d")


def _rewritten(standard, tmp_path, edit):
    import json
    import shutil

    d = tmp_path / "ck"
    shutil.copytree(standard, d)
    meta = json.loads((d / "_METADATA").read_text())
    edit(meta["tree_metadata"])
    (d / "_METADATA").write_text(json.dumps(meta))
    return d


def test_deep_and_sparse_metadata_keys_give_one_line_errors(standard, tmp_path):
    def deep(levels):  # levels of nesting above one leaf: built and converted without recursion
        def edit(tm):
            tm["deep"] = {
                "key_metadata": [{"key": f"k{i}", "key_type": 2} for i in range(levels)],
                "value_metadata": {"value_type": "None", "skip_deserialize": True},
            }

        return edit

    t = tio.load(_rewritten(standard, tmp_path / "a", deep(MAX_DEPTH)))
    node, depth = t, 0
    while isinstance(node, dict) and f"k{depth}" in node:
        node, depth = node[f"k{depth}"], depth + 1
    assert depth == MAX_DEPTH and node is None
    assert t["np"].shape == (4,)  # the rest of the tree as before
    with pytest.raises(LoadError, match=r"_METADATA: 'deep' is 200000 keys deep, more than 1000$"):
        tio.load(_rewritten(standard, tmp_path / "a2", deep(200_000)))

    def sparse(tm):  # a list index of 10**9 must not allocate a list of 10**9 slots
        entry = tm["('lst', '1')"]  # the None in the list
        assert entry["value_metadata"]["value_type"] == "None"
        entry["key_metadata"][1]["key"] = str(10**9)

    with pytest.raises(LoadError, match=r"_METADATA: sequence indices 0..1000000000 for 2 entries"):
        tio.load(_rewritten(standard, tmp_path / "b", sparse))


def test_checkpoint_without_ocdbt(tmp_path, tree):
    """Arrays in plain zarr directories (`use_ocdbt=False`): metadata read file by file."""
    ck = orbax.Checkpointer(orbax.PyTreeCheckpointHandler(use_ocdbt=False))
    ck.save(tmp_path / "ck", args=orbax.args.PyTreeSave(tree))
    assert (tmp_path / "ck" / "params.dense.kernel" / ".zarray").is_file()
    assert not (tmp_path / "ck" / "manifest.ocdbt").exists()
    t = tio.load(tmp_path / "ck")
    assert _facts(t) == _facts(tree)
    assert np.array_equal(np.asarray(t["lst"][0]), np.ones(2, np.int32))


@pytest.mark.slow
def test_ocdbt_checkpoint_without_tensorstore_is_a_clear_error(standard):
    """The structure reads with no tensorstore (treetool decodes the OCDBT metadata itself);
    reading values needs tensorstore (`treetool[orbax]`): without it, one line that says so."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['tensorstore'] = None\n"
        "import numpy as np\n"
        "import treetool.io as tio\n"
        "from treetool import LoadError\n"
        f"t = tio.read({str(standard)!r}).tree\n"
        "k = t['params']['dense']['kernel']\n"
        "print(k.shape, k.dtype)\n"
        "try:\n    np.asarray(k)\n"
        "except LoadError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "(2, 3) float32",
        f"{standard}: reading an orbax OCDBT checkpoint needs tensorstore "
        "(pip install 'treetool[orbax]')",
    ]


def _entry(*keys, value_type="None", key_type=2):
    return {
        "key_metadata": [{"key": k, "key_type": key_type} for k in keys],
        "value_metadata": {"value_type": value_type, "skip_deserialize": value_type == "None"},
    }


def _with_entries(*entries):
    def edit(tm):
        for i, e in enumerate(entries):
            tm[f"extra{i}"] = e

    return edit


def test_two_key_entries_go_into_their_dict_until_a_leaf_replaces_it(standard, tmp_path):
    """Most entries are two dict keys deep and go straight into the dict made for their first
    key; a later entry that puts a leaf there makes the next two-key entry under it an
    error, as it is when the leaf comes first, and a key path of no keys is the whole tree."""
    t = tio.load(
        _rewritten(standard, tmp_path / "a", _with_entries(_entry("g", "a"), _entry("g", "b")))
    )
    assert t["g"] == {"a": None, "b": None} and t["np"].shape == (4,)
    t = tio.load(_rewritten(standard, tmp_path / "s", _with_entries(_entry("g", "0", key_type=1))))
    assert t["g"] == [None]
    t = tio.load(
        _rewritten(
            standard, tmp_path / "n", _with_entries(_entry("g", "a"), _entry("g"), _entry("g", "c"))
        )
    )
    assert t["g"] == {"c": None}
    conflict = r"_METADATA: g\.c conflicts with a leaf$"
    for i, entries in enumerate(
        [
            (_entry("g", "a"), _entry("g", value_type="x"), _entry("g", "c")),
            (_entry("g", value_type="x"), _entry("g", "c")),
            (_entry("g", "a"), _entry("g", "b"), _entry("g", value_type="x"), _entry("g", "c")),
        ]
    ):
        with pytest.raises(LoadError, match=conflict):
            tio.load(_rewritten(standard, tmp_path / f"c{i}", _with_entries(*entries)))
    root = (_entry("g", "a"), _entry(value_type="x"), _entry("g", "c"))
    with pytest.raises(LoadError, match=r"_METADATA: 'g' conflicts with a leaf$"):
        tio.load(_rewritten(standard, tmp_path / "r", _with_entries(*root)))


def test_an_array_without_zarr_metadata_is_one_line_first_or_later(standard, tmp_path):
    """An entry naming an array the checkpoint does not hold, read before any other array
    and after arrays of one shape and dtype in a row."""
    ghost = _entry("ghost", "w", value_type="np.ndarray")

    def first(tm):
        rest = list(tm.items())
        tm.clear()
        tm["ghost"] = ghost
        tm.update(rest)

    message = r"no zarr metadata for array 'ghost\.w'$"
    with pytest.raises(LoadError, match=message):
        tio.load(_rewritten(standard, tmp_path / "a", first))
    with pytest.raises(LoadError, match=message):
        tio.load(_rewritten(standard, tmp_path / "b", _with_entries(ghost)))


def test_every_slot_of_an_orbax_array_is_set_by_both_constructors() -> None:
    """`OrbaxArray.__init__` and `_alike` fill `LazyArray`'s slots themselves (no super call,
    for speed): a slot either leaves unset would be an AttributeError on first use."""
    a = OrbaxArray((2, 3), "float32", "/ckpt/0/default", "w", "zarr", True, None)
    b = OrbaxArray._alike(a, "b", None)
    slots = [s for k in OrbaxArray.__mro__ for s in getattr(k, "__slots__", ())]
    assert {"source", "_dtname", "param"} <= set(slots)
    for x in (a, b):
        unset = [s for s in slots if not hasattr(x, s)]
        assert unset == [], unset
    assert (b.shape, b.dtype_name, b.file, b.param, b.source) == (
        (2, 3), "float32", "/ckpt/0/default/b", "b", None,
    )  # fmt: skip
