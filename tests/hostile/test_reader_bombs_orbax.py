"""Hostile orbax checkpoints: real ones written by orbax here, then edited. Each must end as one
`treetool: error:` line (exit 2) within the harness bounds, or load what is really there.

Issue 15, items 5 (file-chosen shapes), 6 (claimed sizes), 7 (amplification), 9 (depth),
14 (paths: percent-encoding, `..`, links out of the checkpoint) and 16 for orbax.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from harness import assert_contained, run_cli

import treetool as tt
from treetool import LoadError
from treetool.io._safety._limits import MAX_DEPTH
from treetool.io.orbax import OrbaxArray, allow_fill

pytest.importorskip("orbax.checkpoint")

HUGE = 2**64 - 1

# The checkpoints are written by orbax in a child process: orbax starts jax's runtime, and jax
# then warns on every fork of this process (the harness forks to run each command), which
# would fail every hostile-file test that runs after this module.
_WRITE = """
import sys
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

root = sys.argv[1]
for name, fill, ocdbt in [("plain", 1, False), ("ocdbt", 1, True), ("plain7", 7, False),
                          ("ocdbt7", 7, True)]:
    tree = {"w": jnp.full((64, 64), fill, jnp.float32), "b": np.arange(4, dtype=np.int32) + fill}
    ocp.Checkpointer(ocp.PyTreeCheckpointHandler(use_ocdbt=ocdbt)).save(
        f"{root}/{name}", args=ocp.args.PyTreeSave(tree)
    )
"""


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Real checkpoints written by orbax: `w` f32[64,64] and `b` i32[4] of ones (`plain`: one
    zarr directory per array, `ocdbt`: one OCDBT database) and of sevens (`plain7`, `ocdbt7`);
    `w` is a jax array, so orbax records its sharding."""
    root = tmp_path_factory.mktemp("orbax")
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    subprocess.run(
        [sys.executable, "-c", _WRITE, str(root)], check=True, env=env, capture_output=True
    )
    return root


@pytest.fixture(scope="module")
def plain(made):
    return made / "plain"


@pytest.fixture(scope="module")
def ocdbt(made):
    return made / "ocdbt"


def _copy(src, dst):
    shutil.copytree(src, dst, symlinks=True)
    return dst


def _edit_json(path, edit):
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


# --- 5. file-chosen shapes ------------------------------------------------------------------


def test_zarray_with_100k_huge_dims_then_zero(plain, tmp_path):
    ck = _copy(plain, tmp_path / "ck")
    _edit_json(ck / "w" / ".zarray", lambda z: z.update(shape=[HUGE] * 100_000 + [0]))
    run = run_cli("ls", "ck", cwd=tmp_path)
    assert_contained(run)
    assert run.stderr.endswith("ck: array 'w': 100001 dimensions, more than 64\n")


# --- 6. claimed sizes that allocate ---------------------------------------------------------


@pytest.fixture
def sparse(plain, tmp_path):
    """`w` claims f32[2**31] (8 GiB) and stores no chunk: every element would be the fill."""
    ck = _copy(plain, tmp_path / "ck")
    _edit_json(ck / "w" / ".zarray", lambda z: z.update(shape=[2**31], chunks=[2**31]))
    for f in (ck / "w").iterdir():
        if f.name != ".zarray":
            f.unlink()
    return ck


def test_a_read_claiming_far_more_than_is_stored_is_refused(sparse, tmp_path):
    run = run_cli("ls", "ck", cwd=tmp_path)
    assert_contained(run, rc=0, ls_fields=True)
    assert "['w']\t[2147483648]\tfloat32\n" in run.stdout  # metadata is fine to show
    run = run_cli("get", "ck", "w", cwd=tmp_path)
    assert_contained(run, max_rss=400 << 20)
    assert (
        "ck/w: array f32[2147483648] claims 8589934592 bytes but the checkpoint stores"
        in run.stderr
    )
    assert "pass --allow-fill" in run.stderr

    leaf = tt.load(sparse)["w"]
    for read in (np.asarray, tt.stats, lambda x: x[0], lambda x: next(x.iter_chunks())):
        with pytest.raises(LoadError, match="claims 8589934592 bytes"):
            read(leaf)


def test_allow_fill_reads_slices_of_a_sparse_array(sparse):
    leaf = tt.load(sparse)["w"]
    with allow_fill():
        chunks = leaf.iter_chunks(1 << 16)
        first = next(chunks)  # one slice, not the 8 GiB array
        assert first.shape == (1 << 16,) and first.dtype == np.float32 and not first.any()
        assert leaf.corners().tolist() == [0.0] * 6


def test_orbax_arrays_stream_in_bounded_slices(plain, ocdbt):
    for ck in (plain, ocdbt):
        leaf = tt.load(ck)["w"]
        assert isinstance(leaf, OrbaxArray)
        sizes = [c.size for c in leaf.iter_chunks(1000)]
        assert max(sizes) <= 1000 and sum(sizes) == 64 * 64 and len(sizes) == 5
        whole = np.concatenate(list(leaf.iter_chunks(1000)))
        assert np.array_equal(whole, np.ones(64 * 64, np.float32))
        assert leaf.corners().shape == (6, 6)
        assert tt.stats(leaf).mean == 1.0


# --- 7. amplification -----------------------------------------------------------------------


def test_metadata_of_empty_lists(plain, tmp_path):
    ck = _copy(plain, tmp_path / "ck")
    body = b",".join([b"[]"] * 1_000_000)
    (ck / "_METADATA").write_bytes(b'{"tree_metadata": {"x": [' + body + b"]}}")
    run = run_cli("ls", "ck", cwd=tmp_path)
    assert_contained(run, max_rss=300 << 20)
    assert "ck/_METADATA: more than 151001 JSON objects and arrays in 3000027 bytes" in run.stderr


# --- 9. depth -------------------------------------------------------------------------------


def _deep_entry(levels):
    return {
        "key_metadata": [{"key": f"k{i}", "key_type": 2} for i in range(levels)],
        "value_metadata": {"value_type": "None", "skip_deserialize": True},
    }


def test_metadata_200k_levels_deep(plain, tmp_path):
    ck = _copy(plain, tmp_path / "ck")
    _edit_json(ck / "_METADATA", lambda m: m["tree_metadata"].update(deep=_deep_entry(200_000)))
    run = run_cli("ls", "ck", cwd=tmp_path)
    assert_contained(run)
    assert run.stderr.endswith("_METADATA: 'deep' is 200000 keys deep, more than 1000\n")


def test_metadata_json_nested_deep(plain, tmp_path):
    ck = _copy(plain, tmp_path / "ck")
    meta = (ck / "_METADATA").read_bytes()
    deep = b'{"pad": "' + b"x" * 200_000 + b'", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    (ck / "_METADATA").write_bytes(meta[:-1] + b', "more": ' + deep + b"}")
    run = run_cli("ls", "ck", cwd=tmp_path)
    assert_contained(run)
    assert "_METADATA: JSON nested more than 64 levels deep" in run.stderr


def test_a_tree_at_the_depth_limit_diffs_and_saves(plain, tmp_path):
    ck = _copy(plain, tmp_path / "ck")
    _edit_json(ck / "_METADATA", lambda m: m["tree_metadata"].update(deep=_deep_entry(MAX_DEPTH)))
    tree = tt.load(ck)
    assert not tt.diff(tree, tree)
    small = {"w": tree["w"], "deep": tree["k0"]}
    tt.save(small, tmp_path / "out.safetensors")
    assert tt.load(tmp_path / "out.safetensors")["w"].shape == (64, 64)
    with pytest.raises(tt.SaveError, match="nested too deeply to pickle"):
        tt.save(small, tmp_path / "out.pkl")
    assert not (tmp_path / "out.pkl").exists()


# --- 14. paths ------------------------------------------------------------------------------


def test_percent_encoded_item_name_reads_its_own_data(made, tmp_path):
    """`x%2F..%2Fvictim` as a file:// URL is `x/../victim`: a sibling's data. Specs are JSON."""
    _copy(made / "ocdbt7", tmp_path / "victim")
    (tmp_path / "x").mkdir()
    _copy(made / "ocdbt", tmp_path / "x%2F..%2Fvictim")
    tree = tt.load(tmp_path / "x%2F..%2Fvictim")
    assert np.asarray(tree["w"]).max() == 1.0 and np.asarray(tree["b"]).tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize("name", ["run#1", "step?v=2", "a%20b"])
def test_item_names_with_url_characters_load(ocdbt, tmp_path, name):
    ck = _copy(ocdbt, tmp_path / name)
    assert np.asarray(tt.load(ck)["b"]).tolist() == [1, 2, 3, 4]


@pytest.fixture
def secret(made, tmp_path):
    """A valid zarr chunk of sevens, outside any checkpoint."""
    other = made / "plain7"
    (tmp_path / "secret").mkdir()
    shutil.copy(other / "w" / "0.0", tmp_path / "secret" / "chunk")
    return tmp_path / "secret" / "chunk"


def test_a_chunk_linked_out_of_the_checkpoint_is_not_read(plain, tmp_path, secret):
    ck = _copy(plain, tmp_path / "ck")
    (ck / "w" / "0.0").unlink()
    (ck / "w" / "0.0").symlink_to(secret)
    run = run_cli("get", "ck", "w", cwd=tmp_path)
    assert_contained(run)
    assert run.stderr.endswith("w/0.0 is a link to outside the checkpoint\n")
    tree = tt.load(ck)
    with pytest.raises(LoadError, match="link to outside the checkpoint"):
        np.asarray(tree["w"])
    with pytest.raises(LoadError, match="link to outside the checkpoint"):
        tt.save(tree, tmp_path / "copy.npz")
    assert not (tmp_path / "copy.npz").exists()


def test_an_ocdbt_data_file_linked_out_is_not_read(ocdbt, tmp_path, secret):
    ck = _copy(ocdbt, tmp_path / "ck")
    data = sorted((ck / "d").iterdir()) if (ck / "d").is_dir() else []
    data += sorted(ck.glob("ocdbt.process_*/d/*"))
    victim = data[-1]
    shutil.copy(victim, tmp_path / "moved")
    victim.unlink()
    victim.symlink_to(tmp_path / "moved")  # even a link to a copy of its own bytes
    with pytest.raises(LoadError, match="is a link to outside the checkpoint"):
        np.asarray(tt.load(ck)["w"])


def test_a_link_inside_the_checkpoint_is_fine(plain, tmp_path):
    ck = _copy(plain, tmp_path / "ck")
    (ck / "w" / "0.0").rename(ck / "w" / "real")
    (ck / "w" / "0.0").symlink_to("real")
    assert np.asarray(tt.load(ck)["w"]).max() == 1.0


def test_metadata_linked_out_is_refused(plain, tmp_path):
    ck = _copy(plain, tmp_path / "ck")
    (ck / "_METADATA").rename(tmp_path / "elsewhere")
    (ck / "_METADATA").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(LoadError, match="_METADATA: a link to outside the checkpoint"):
        tt.load(ck)


@pytest.mark.parametrize("key", ["../victim", "a/../../victim", "/etc"])
def test_array_names_that_leave_the_checkpoint(made, plain, tmp_path, key):
    _copy(made / "plain7", tmp_path / "victim")
    ck = _copy(plain, tmp_path / "ck")

    def edit(meta):
        entry = meta["tree_metadata"].pop("('w',)")
        entry["key_metadata"][0]["key"] = key
        meta["tree_metadata"][f"('{key}',)"] = entry

    _edit_json(ck / "_METADATA", edit)
    with pytest.raises(LoadError, match="leaves the checkpoint directory"):
        tt.load(ck)
    run = run_cli("ls", "ck", cwd=tmp_path)
    assert_contained(run)


# --- 16. only LoadError -----------------------------------------------------------------------


def test_deep_sharding_json_is_not_a_recursion_error(plain, tmp_path):
    ck = _copy(plain, tmp_path / "ck")

    def edit(sh):
        for k in sh:
            sh[k] = "[" * 100_000 + "]" * 100_000

    _edit_json(ck / "_sharding", edit)
    tree = tt.load(ck)  # a sharding that cannot be read is left out, the arrays still load
    assert tree["w"].sharding is None and tree["w"].shape == (64, 64)


def test_lone_surrogate_array_name(plain, tmp_path):
    ck = _copy(plain, tmp_path / "ck")

    def edit(meta):
        entry = meta["tree_metadata"].pop("('w',)")
        entry["key_metadata"][0]["key"] = "w\ud800"
        meta["tree_metadata"]["('w\ud800',)"] = entry

    _edit_json(ck / "_METADATA", edit)
    with pytest.raises(LoadError) as info:
        tt.load(ck)
    assert type(info.value) is LoadError


def test_bad_dtype_strings_in_zarr(plain, tmp_path):
    for i, dtype in enumerate(["(2,", "(2,)f4", "|V0", "O", "x" * 100]):
        ck = _copy(plain, tmp_path / f"ck{i}")
        _edit_json(ck / "w" / ".zarray", lambda z, d=dtype: z.update(dtype=d))
        with pytest.raises(LoadError, match=r"array 'w'|unsupported dtype") as info:
            tt.load(ck)
        assert type(info.value) is LoadError


def test_orbax_rows_read_as_numpy_indexes_them(plain):
    leaf = tt.load(plain)["b"]
    assert leaf[-1].tolist() == 4 and leaf[1:3].tolist() == [2, 3] and leaf[-2:].tolist() == [3, 4]
    assert leaf[::2].tolist() == [1, 3]
    with pytest.raises(IndexError):
        leaf[4]


def test_allow_fill_streams_a_sparse_array_in_bounded_memory(plain, tmp_path):
    """256 MiB of fill values (just past the limit): `get --allow-fill` computes its stats and
    corners slice by slice, never holding the array; `diff` without the flag is refused."""
    ck = _copy(plain, tmp_path / "ck")
    _edit_json(ck / "w" / ".zarray", lambda z: z.update(shape=[2**26 + 1024], chunks=[2**20]))
    for f in (ck / "w").iterdir():
        if f.name != ".zarray":
            f.unlink()
    run = run_cli("get", "ck", "w", "--allow-fill", "--stats", cwd=tmp_path)
    assert_contained(run, rc=0, max_rss=200 << 20)  # the array alone is 256 MiB
    assert "zeros      67.1M" in run.stdout
    assert "first and last 3 along each axis:\n[0. 0. 0. ... 0. 0. 0.]" in run.stdout
    run = run_cli("diff", "ck", "ck", cwd=tmp_path)
    assert_contained(run)
    assert "claims 268439552 bytes" in run.stderr and "pass --allow-fill" in run.stderr


def test_a_step_or_item_linked_out_of_the_run_is_refused(plain, tmp_path):
    """A CheckpointManager run whose latest step is a link to another checkpoint elsewhere."""
    elsewhere = _copy(plain, tmp_path / "elsewhere")
    run = tmp_path / "run"
    (run / "1").mkdir(parents=True)
    _copy(plain, run / "1" / "default")
    (run / "2").symlink_to(elsewhere.parent)  # step 2 -> a directory outside the run
    with pytest.raises(LoadError, match=r"run/2: a link to outside the checkpoint"):
        tt.load(run)
    (run / "2").unlink()
    (run / "1" / "extra").symlink_to(elsewhere)  # an item of step 1 -> outside
    with pytest.raises(LoadError, match=r"1/extra: a link to outside the checkpoint"):
        tt.load(run)
    (run / "1" / "extra").unlink()
    assert tt.load(run)["b"].shape == (4,)
