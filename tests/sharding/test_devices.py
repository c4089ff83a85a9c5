"""Device placement and sharding: every fact is checked against jax's own addressable_shards."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import textwrap
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import NamedSharding, PartitionSpec
from rich.console import Console

import treetool as tt
from treetool._leaves._arrays import LazyArray
from treetool._lowering._labels import devices_text
from treetool._sharding._devices import Placement
from treetool._sharding._layout import _build_layout, device_name
from treetool._sharding._rich import DeviceBars, PlacementView, ShardingGrid, bar

P = PartitionSpec


@pytest.fixture(scope="module")
def mesh():
    assert len(jax.devices()) == 8, "tests/conftest.py must give 8 CPU devices"
    return jax.make_mesh((2, 4), ("data", "model"))


def _put(mesh, shape, spec, dtype=np.float32):
    x = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    return jax.device_put(x, NamedSharding(mesh, spec))


@pytest.fixture(scope="module")
def model(mesh):
    """Params over a 2x4 mesh: split on one axis, on both, on a merged axis; replicated;
    one leaf on one device; an uncommitted step counter; a host array."""
    return {
        "embed": _put(mesh, (32, 8), P(("data", "model"), None)),
        "layers": [
            {
                "w": _put(mesh, (8, 16), P("data", "model")),
                "b": _put(mesh, (16,), P("model")),
            },
            {
                "w": _put(mesh, (16, 8), P("model", None)),
                "b": _put(mesh, (8,), P()),
            },
        ],
        "norm": {"scale": _put(mesh, (2, 4, 6), P("data", None, None), np.int8)},
        "head": jax.device_put(np.ones((4, 4), np.float32), jax.devices()[3]),
        "step": jnp.zeros((), jnp.int32),
        "host": np.zeros(3, np.float64),
    }


@pytest.fixture(scope="module")
def placed(model):
    return tt.placement(model)


def _jax_leaves(tree):
    return [
        (str(tt.Path.from_jax(p)), x)
        for p, x in jax.tree_util.tree_flatten_with_path(tree)[0]
        if isinstance(x, jax.Array)
    ]


def test_kinds_and_paths(placed):
    assert {str(p): lp.kind for p, lp in placed.leaves.items()} == {
        "['embed']": "named",
        "['head']": "single",
        "['host']": "host",
        "['layers'][0]['b']": "named",
        "['layers'][0]['w']": "named",
        "['layers'][1]['b']": "named",
        "['layers'][1]['w']": "named",
        "['norm']['scale']": "named",
        "['step']": "single",
    }


def test_every_leaf_matches_addressable_shards(model, placed):
    for path, x in _jax_leaves(model):
        lp = placed[path]
        shards = x.addressable_shards
        assert set(lp.devices) == x.sharding.device_set, path
        assert lp.bytes_per_device == {s.device: s.data.nbytes for s in shards}, path
        assert {lp.shard_shape} == {s.data.shape for s in shards}, path
        copies = Counter(str(s.index) for s in shards)
        assert {lp.replication} == set(copies.values()), path
        assert lp.committed is x.committed, path
        assert lp.fully_addressable is x.is_fully_addressable is True
        assert lp.shape == x.shape and lp.dtype == x.dtype.name and lp.nbytes == x.nbytes


def test_bytes_per_device_equal_jax(model, placed):
    want_bytes: Counter = Counter()
    want_leaves: Counter = Counter()
    for _, x in _jax_leaves(model):
        for s in x.addressable_shards:
            want_bytes[s.device] += s.data.nbytes
            want_leaves[s.device] += 1
    assert list(placed.per_device) == sorted(jax.devices(), key=lambda d: d.id)
    assert {d: u.bytes for d, u in placed.per_device.items()} == dict(want_bytes)
    assert {d: u.leaves for d, u in placed.per_device.items()} == dict(want_leaves)
    assert placed.device_bytes == sum(want_bytes.values()) == 3204
    assert placed.total_bytes == 1024 + 512 + 64 + 512 + 32 + 48 + 64 + 4
    assert placed.host_bytes == 24
    assert all(u.addressable for u in placed.per_device.values())


def test_named_sharding_facts(placed):
    w = placed["['layers'][0]['w']"]
    assert w.mesh_shape == {"data": 2, "model": 4}
    assert w.spec == ("data", "model")
    assert w.dim_axes == (("data",), ("model",))
    assert w.sharded_dims == (0, 1)
    assert w.shard_shape == (4, 4)
    assert w.replication == 1
    assert w.description == "P('data', 'model') on data=2×model=4"
    e = placed["embed"]
    assert e.spec == (("data", "model"), None)
    assert e.dim_axes == (("data", "model"), ())
    assert e.shard_shape == (4, 8)
    assert e.description == "P(('data', 'model'), None) on data=2×model=4"
    b = placed["layers.0.b"]
    assert (b.shard_shape, b.replication, b.dim_axes) == ((4,), 2, (("model",),))
    norm = placed["['layers'][1]['b']"]
    assert norm.replicated and norm.replication == 8 and norm.sharded_dims == ()
    assert norm.description == "P() on data=2×model=4"
    scale = placed["norm.scale"]
    assert (scale.dtype, scale.shard_shape, scale.replication) == ("int8", (1, 4, 6), 4)


def test_single_device_and_uncommitted(placed):
    head = placed["head"]
    assert head.kind == "single" and head.devices == (jax.devices()[3],)
    assert head.description == "cpu:3" and head.committed is True
    step = placed["step"]
    assert step.kind == "single" and step.committed is False
    assert step.devices == (jax.devices()[0],)
    host = placed["host"]
    assert (host.kind, host.devices, host.bytes_per_device, host.nbytes) == ("host", (), {}, 24)


def test_mesh_axes_and_groups(placed):
    assert placed.meshes == [{"data": 2, "model": 4}]
    assert placed.mesh == {"data": 2, "model": 4}
    axes = placed.axes
    assert {k: (a.size, a.leaves, a.nbytes) for k, a in axes.items()} == {
        "data": (2, 3, 1024 + 512 + 48),
        "model": (4, 4, 1024 + 512 + 64 + 512),
    }
    assert [(str(p), d) for p, d in placed.on_axis("model")] == [
        ("['embed']", 0),
        ("['layers'][0]['b']", 0),
        ("['layers'][0]['w']", 1),
        ("['layers'][1]['w']", 0),
    ]
    groups = {k: [str(p) for p in v] for k, v in placed.shardings.items()}
    assert groups["cpu:0"] == ["['step']"]
    assert groups["host"] == ["['host']"]
    assert groups["P('model', None) on data=2×model=4"] == ["['layers'][1]['w']"]
    assert sum(len(v) for v in groups.values()) == 9


def test_leaves_on_one_device(placed):
    on3 = [str(lp.path) for lp in placed.on("cpu:3")]
    assert on3 == [
        "['embed']",
        "['head']",
        "['layers'][0]['b']",
        "['layers'][0]['w']",
        "['layers'][1]['b']",
        "['layers'][1]['w']",
        "['norm']['scale']",
    ]
    assert [str(lp.path) for lp in placed.on(jax.devices()[0])][-1] == "['step']"
    with pytest.raises(KeyError, match=re.escape("no device 'gpu:0' in the placement")):
        placed.on("gpu:0")


def test_missing_path_suggests(placed):
    with pytest.raises(tt.PathError, match=re.escape("Did you mean \"['head']\"")):
        placed["['haed']"]


def test_warnings(mesh, model):
    p = tt.placement(model, large=32)
    kinds = {w.kind: w for w in p.warnings}
    assert set(kinds) == {"replicated", "uncommitted"}
    rep = kinds["replicated"]
    assert [str(q) for q in rep.paths] == ["['layers'][1]['b']"]
    assert str(rep) == (
        "1 large leaf (>= 32 B) fully replicated on up to 8 devices, 224 B in extra copies: "
        "['layers'][1]['b']"
    )
    unc = kinds["uncommitted"]
    assert [str(q) for q in unc.paths] == ["['step']"]
    # by default (large = 1 MiB) nothing in this small model is "large"
    assert {w.kind for w in tt.placement(model).warnings} == {"uncommitted"}


def test_imbalance_warning(mesh):
    tree = {
        "big": jax.device_put(np.zeros((64, 64), np.float32), jax.devices()[5]),
        "w": _put(mesh, (8, 16), P("data", "model")),
    }
    p = tt.placement(tree)
    assert p.imbalance == pytest.approx((16384 + 64) * 8 / (16384 + 512))
    (w,) = p.warnings
    assert w.kind == "imbalance"
    assert [str(q) for q in w.paths] == ["['big']"]
    assert w.message == (
        "bytes are uneven across devices: cpu:5 holds 16.4 KB, 7.79x the mean (2.1 KB); "
        "cpu:0 holds 64 B; on cpu:5, not spread over every device: ['big']"
    )
    assert tt.placement(tree, imbalance=10.0).warnings == []


def test_platforms_warning(mesh):
    # A second platform needs a second kind of device; CPU-only machines have one. The
    # warning is computed from the leaves' layouts, so one layout is relabelled "gpu".
    x = _put(mesh, (8,), P("model"))
    lay = _build_layout(x.sharding, x.shape, 4)
    gpu = dataclasses.replace(lay, platform="gpu")
    leaves = [
        tt.LeafPlacement(tt.Path.parse("a"), "named", (8,), "float32", 32, True, "live", None, lay),
        tt.LeafPlacement(tt.Path.parse("b"), "named", (8,), "float32", 32, True, "live", None, lay),
        tt.LeafPlacement(tt.Path.parse("c"), "named", (8,), "float32", 32, True, "live", None, gpu),
    ]
    (w,) = Placement(leaves).warnings
    assert w.kind == "platforms"
    assert [str(q) for q in w.paths] == [".c"]
    assert w.message == "leaves live on 2 platforms: cpu (2 leaves), gpu (1 leaf); not on cpu: .c"


def test_host_file_abstract_object_leaves(mesh, tmp_path):
    f = tmp_path / "x.bin"
    f.write_bytes(np.arange(6, dtype=np.float32).tobytes())
    planned = jax.ShapeDtypeStruct((8, 4), jnp.bfloat16, sharding=NamedSharding(mesh, P("data")))
    tree = {
        "np": np.ones((2, 2), np.float32),
        "scalar": np.float32(1.0),
        "lazy": LazyArray((2, 3), "float32", str(f)),
        "planned": planned,
        "shape_only": jax.ShapeDtypeStruct((3,), jnp.float32),
        "act": "relu",
        "n": 3,
    }
    p = tt.placement(tree)
    kinds = {str(q): (lp.kind, lp.nbytes) for q, lp in p.leaves.items()}
    assert kinds == {
        "['act']": ("object", 0),
        "['lazy']": ("file", 24),
        "['n']": ("object", 0),
        "['np']": ("host", 16),
        "['planned']": ("named", 64),
        "['scalar']": ("host", 4),
        "['shape_only']": ("abstract", 12),
    }
    assert (p.host_bytes, p.file_bytes) == (20, 24)
    pl = p["planned"]
    assert pl.abstract and pl.source == "planned" and pl.committed is None
    assert pl.description == "planned P('data',) on data=2×model=4"
    # a planned leaf is split over `data` and replicated over `model`: 8x4 bf16 -> 4x4 blocks
    assert {d.id: b for d, b in pl.bytes_per_device.items()} == {i: 32 for i in range(8)}
    assert p["shape_only"].devices == ()


def test_traced_and_deleted_leaves(mesh):
    seen = {}

    @jax.jit
    def f(x):
        seen["kinds"] = [lp.kind for lp in tt.placement({"x": x}).leaves.values()]
        return x

    f(jnp.ones(2))
    assert seen["kinds"] == ["traced"]
    gone = _put(mesh, (8,), P("model"))
    gone.delete()
    p = tt.placement({"gone": gone})
    assert (p["gone"].kind, p["gone"].devices, p.per_device) == ("deleted", (), {})


def test_to_dict_is_json(placed):
    d = json.loads(json.dumps(placed.to_dict()))
    w = next(x for x in d["leaves"] if x["path"] == "['layers'][0]['w']")
    assert w == {
        "path": "['layers'][0]['w']",
        "kind": "named",
        "shape": [8, 16],
        "dtype": "float32",
        "nbytes": 512,
        "committed": True,
        "source": "live",
        "devices": [f"cpu:{i}" for i in range(8)],
        "platform": "cpu",
        "memory_kind": "device",
        "mesh": {"data": 2, "model": 4},
        "spec": ["data", "model"],
        "shard_shape": [4, 4],
        "replication": 1,
        "fully_addressable": True,
        "bytes_per_device": {f"cpu:{i}": 64 for i in range(8)},
    }
    e = next(x for x in d["leaves"] if x["path"] == "['embed']")
    assert e["spec"] == [["data", "model"], None]
    assert [x["device"] for x in d["devices"]] == [f"cpu:{i}" for i in range(8)]
    assert d["devices"][3] == {
        "device": "cpu:3",
        "platform": "cpu",
        "process": 0,
        "addressable": True,
        "bytes": placed.per_device[jax.devices()[3]].bytes,
        "leaves": 7,
    }
    assert d["axes"]["model"] == {"size": 4, "leaves": 4, "nbytes": 2112}
    assert d["host_bytes"] == 24


# --- a property: any spec over the mesh agrees with jax -----------------------------------

_AXES = st.sampled_from([None, "data", "model", ("data", "model"), ("model", "data")])


@st.composite
def _specs(draw):
    ndim = draw(st.integers(1, 3))
    entries = [draw(_AXES) for _ in range(ndim)]
    used: list[str] = []
    clean = []
    for e in entries:  # a mesh axis may appear only once in a spec
        names = (e,) if isinstance(e, str) else (e or ())
        if any(n in used for n in names):
            e = None
            names = ()
        used.extend(names)
        clean.append(e)
    sizes = {"data": 2, "model": 4}
    shape = []
    for e in clean:
        names = (e,) if isinstance(e, str) else (e or ())
        split = int(np.prod([sizes[n] for n in names])) if names else 1
        shape.append(split * draw(st.integers(1, 2)))
    return tuple(shape), P(*clean)


@settings(max_examples=25)
@given(_specs(), st.sampled_from([np.float32, np.int8, np.float16]))
def test_property_any_spec_matches_jax(mesh, spec_shape, dtype):
    shape, spec = spec_shape
    x = _put(mesh, shape, spec, dtype)
    p = tt.placement({"x": x})
    lp = p["x"]
    assert lp.bytes_per_device == {s.device: s.data.nbytes for s in x.addressable_shards}
    assert {lp.shard_shape} == {s.data.shape for s in x.addressable_shards}
    assert lp.replication * len(lp.layout.blocks) == 8
    assert sum(u.bytes for u in p.per_device.values()) == x.nbytes * lp.replication


# --- rendering ------------------------------------------------------------------------------


def _text(renderable, width=80):
    c = Console(width=width, color_system=None, file=io.StringIO(), legacy_windows=False)
    c.print(renderable)
    return "\n".join(line.rstrip() for line in c.file.getvalue().splitlines())


def test_render_lowers_the_placement_by_class(placed):
    # the registry by class picks PlacementView; rich.print(placed) draws the same lowering
    assert isinstance(tt.render(placed), PlacementView)
    assert _text(tt.render(placed)) == _text(PlacementView(placed)) == _text(placed)
    assert isinstance(placed.grid("head"), ShardingGrid)
    assert _text(tt.render(placed["head"])) == _text(placed.grid("head"))


def test_bar():
    assert bar(5, 10, 4) == "██  "
    assert bar(1, 16, 2) == "▏ "
    assert bar(7, 0, 3) == "   "


def test_devices_text():
    assert devices_text(jax.devices()) == "cpu 0-7"
    assert devices_text([jax.devices()[i] for i in (0, 1, 4, 5, 6)]) == "cpu 0,1,4-6"


def test_device_bars_text(placed):
    assert _text(DeviceBars(placed, width=20)) == textwrap.dedent(
        """\
        cpu:0  █████████████████▍    396 B  7 leaves
        cpu:1  █████████████████▎    392 B  6 leaves
        cpu:2  █████████████████▎    392 B  6 leaves
        cpu:3  ████████████████████  456 B  7 leaves
        cpu:4  █████████████████▎    392 B  6 leaves
        cpu:5  █████████████████▎    392 B  6 leaves
        cpu:6  █████████████████▎    392 B  6 leaves
        cpu:7  █████████████████▎    392 B  6 leaves
        host   █                      24 B  1 leaf"""
    )


def test_grid_two_sharded_dims(placed):
    assert _text(placed.grid("layers.0.w")) == textwrap.dedent(
        """\
        ['layers'][0]['w']  f32[8,16]  P('data', 'model') on data=2×model=4
        ┌───────────────┬───────┬───────┬───────┬───────┐
        │ dim 0 \\ dim 1 │  0:4  │  4:8  │ 8:12  │ 12:16 │
        ├───────────────┼───────┼───────┼───────┼───────┤
        │ 0:4           │ cpu 0 │ cpu 1 │ cpu 2 │ cpu 3 │
        ├───────────────┼───────┼───────┼───────┼───────┤
        │ 4:8           │ cpu 4 │ cpu 5 │ cpu 6 │ cpu 7 │
        └───────────────┴───────┴───────┴───────┴───────┘
        block [4,4] · 8 blocks · ×1 copy · dim 0 over data · dim 1 over model"""
    )


def test_grid_replicated_blocks_and_rank3(placed):
    assert _text(placed.grid("['layers'][0]['b']")) == textwrap.dedent(
        """\
        ['layers'][0]['b']  f32[16]  P('model',) on data=2×model=4
        ┌───────┬─────────┬─────────┬─────────┬─────────┐
        │ dim 0 │   0:4   │   4:8   │  8:12   │  12:16  │
        ├───────┼─────────┼─────────┼─────────┼─────────┤
        │       │ cpu 0,4 │ cpu 1,5 │ cpu 2,6 │ cpu 3,7 │
        └───────┴─────────┴─────────┴─────────┴─────────┘
        block [4] · 4 blocks · ×2 copies · dim 0 over model"""
    )
    assert _text(placed.grid("norm.scale")) == textwrap.dedent(
        """\
        ['norm']['scale']  i8[2,4,6]  P('data', None, None) on data=2×model=4
        ┌───────┬─────────┬─────────┐
        │ dim 0 │   0:1   │   1:2   │
        ├───────┼─────────┼─────────┤
        │       │ cpu 0-3 │ cpu 4-7 │
        └───────┴─────────┴─────────┘
        block [1,4,6] · 2 blocks · ×4 copies · dim 0 over data"""
    )


def test_grid_rank4_uses_rows_and_column_products(mesh):
    x = _put(mesh, (2, 3, 4, 2), P("data", None, "model", None))
    p = tt.placement(x)
    text = _text(p.grid(""))
    assert (
        text.splitlines()[0]
        == "<root>  f32[2,3,4,2]  P('data', None, 'model', None) on data=2×model=4"
    )
    assert "│ dim 0 \\ dim 2 │  0:1  │  1:2  │  2:3  │  3:4  │" in text
    assert "│ 1:2           │ cpu 4 │ cpu 5 │ cpu 6 │ cpu 7 │" in text
    assert text.splitlines()[-1] == (
        "block [1,3,1,2] · 8 blocks · ×1 copy · dim 0 over data · dim 2 over model"
    )


def test_grid_single_device_and_host(placed):
    assert _text(placed.grid("head")) == textwrap.dedent(
        """\
        ['head']  f32[4,4]  cpu:3
        ┌───────┐
        │ cpu 3 │
        └───────┘
        block [4,4] · 1 block · ×1 copy"""
    )
    assert _text(ShardingGrid(placed["host"])) == (
        "['host']  f64[3]  host: in this process's memory, on no jax device"
    )
    assert _text(placed["head"]) == _text(placed.grid("head"))


def test_placement_view_text(mesh):
    tree = {
        "w": _put(mesh, (8, 16), P("data", "model")),
        "b": _put(mesh, (16,), P()),
        "head": jax.device_put(np.ones((4, 4), np.float32), jax.devices()[1]),
    }
    text = _text(tt.placement(tree, large=64), width=90)
    assert text == textwrap.dedent(
        """\
        3 leaves · 8 devices (cpu) · 1.1 KB on devices (640 B logical) · mesh data=2×model=4 ·
        max/mean 1.41

        cpu:0  ████████████████████            128 B  2 leaves
        cpu:1  ██████████████████████████████  192 B  3 leaves
        cpu:2  ████████████████████            128 B  2 leaves
        cpu:3  ████████████████████            128 B  2 leaves
        cpu:4  ████████████████████            128 B  2 leaves
        cpu:5  ████████████████████            128 B  2 leaves
        cpu:6  ████████████████████            128 B  2 leaves
        cpu:7  ████████████████████            128 B  2 leaves
        split over data (2): 1 leaf, 512 B · model (4): 1 leaf, 512 B

        sharding / leaf                        array       block   copies   bytes
        ─────────────────────────────────────────────────────────────────────────
        P() on data=2×model=4                  1 leaf                        64 B
          ['b']                                f32[16]     [16]        ×8    64 B

        cpu:1                                  1 leaf                        64 B
          ['head']                             f32[4,4]    [4,4]       ×1    64 B

        P('data', 'model') on data=2×model=4   1 leaf                       512 B
          ['w']                                f32[8,16]   [4,4]       ×1   512 B
        ⚠ 1 large leaf (>= 64 B) fully replicated on up to 8 devices, 448 B in extra copies: ['b']
        ⚠ bytes are uneven across devices: cpu:1 holds 192 B, 1.41x the mean (136 B); cpu:0 holds
        128 B; on cpu:1, not spread over every device: ['head']"""
    )


def test_sharding_table_limits_rows(mesh):
    tree = [_put(mesh, (8,), P("model")) for _ in range(12)]
    text = _text(PlacementView(tt.placement(tree), per_group=3))
    assert "  [2]  " in text and "  [3]  " not in text
    assert "  … 9 more" in text
    assert "P('model',) on data=2×model=4   12 leaves                    384 B" in text


def test_device_name():
    assert device_name(jax.devices()[7]) == "cpu:7"


# --- shardings recorded in orbax checkpoints ------------------------------------------------


def _orbax_record(sharding) -> dict:
    """The `_sharding` entry orbax writes for a live sharding (format of orbax 0.11)."""
    if isinstance(sharding, jax.sharding.SingleDeviceSharding):
        (d,) = sharding.device_set
        return {"sharding_type": "SingleDeviceSharding", "device_str": device_name(d)}
    mesh = sharding.mesh
    return {
        "sharding_type": "NamedSharding",
        "shape": list(mesh.devices.shape),
        "axis_names": list(mesh.axis_names),
        "partition_spec": [list(e) if isinstance(e, tuple) else e for e in sharding.spec],
        "device_mesh": {"mesh": np.vectorize(lambda d: {"id": d.id})(mesh.devices).tolist()},
    }


def _by_id(bytes_per_device: dict) -> dict[int, int]:
    return {d.id: b for d, b in bytes_per_device.items()}


@settings(max_examples=25)
@given(_specs(), st.sampled_from([np.float32, np.int8]))
def test_property_recorded_layout_matches_jax(mesh, spec_shape, dtype):
    from treetool._sharding._layout import _recorded_layout

    shape, spec = spec_shape
    x = _put(mesh, shape, spec, dtype)
    live = tt.placement(x)[""]
    rec = _recorded_layout(_orbax_record(x.sharding), x.shape, x.dtype.itemsize)
    assert _by_id(rec.bytes_per_device) == _by_id(live.bytes_per_device)
    assert rec.shard_shape == live.shard_shape
    assert rec.replication == live.replication
    assert rec.dim_axes == live.dim_axes
    assert [(idx, [d.id for d in devs]) for idx, devs in rec.blocks] == [
        (idx, [d.id for d in devs]) for idx, devs in live.layout.blocks
    ]


@pytest.fixture(scope="module")
def orbax_dir(model, tmp_path_factory):
    import orbax.checkpoint as ocp

    path = tmp_path_factory.mktemp("orbax") / "ckpt"
    ckpt = ocp.StandardCheckpointer()
    ckpt.save(path, {k: v for k, v in model.items() if k != "step"})
    ckpt.wait_until_finished()
    return path


def test_orbax_checkpoint_recorded_shardings(model, placed, orbax_dir):
    loaded = tt.load(str(orbax_dir))
    p = tt.placement(loaded)
    kinds = {str(q): (lp.kind, lp.source) for q, lp in p.leaves.items()}
    assert kinds == {
        "['embed']": ("named", "recorded"),
        "['head']": ("single", "recorded"),
        "['host']": ("file", ""),
        "['layers'][0]['b']": ("named", "recorded"),
        "['layers'][0]['w']": ("named", "recorded"),
        "['layers'][1]['b']": ("named", "recorded"),
        "['layers'][1]['w']": ("named", "recorded"),
        "['norm']['scale']": ("named", "recorded"),
    }
    for q, lp in p.leaves.items():
        if lp.kind == "file":
            continue
        live = placed[q]
        assert _by_id(lp.bytes_per_device) == _by_id(live.bytes_per_device), q
        assert (lp.shard_shape, lp.replication, lp.spec, lp.mesh_shape) == (
            live.shard_shape,
            live.replication,
            live.spec,
            live.mesh_shape,
        ), q
    assert p["head"].description == "recorded cpu:3"
    assert p["layers.0.w"].description == "recorded P('data', 'model') on data=2×model=4"
    assert [u.name for u in p.per_device.values()][:2] == ["cpu:3", "device:0"]
    assert p.warnings == []  # `device` (no platform recorded) does not disagree with `cpu`
    # bytes per recorded device id equal those of the live tree (without the uncommitted step)
    live_ids = Counter()
    for lp in placed.leaves.values():
        if lp.on_device and str(lp.path) != "['step']":
            for d, b in lp.bytes_per_device.items():
                live_ids[d.id] += b
    rec_ids = Counter()
    for d, u in p.per_device.items():
        rec_ids[d.id] += u.bytes
    assert rec_ids == live_ids
    assert _text(p.grid("layers.0.w")).splitlines()[4] == (
        "│ 0:4           │ device 0 │ device 1 │ device 2 │ device 3 │"
    )


@pytest.mark.slow
def test_recorded_placement_needs_no_jax(orbax_dir):
    import subprocess
    import sys

    code = (
        "import sys, treetool as tt\n"
        f"p = tt.placement(tt.load({str(orbax_dir)!r}))\n"
        "print(len(p.per_device), p['layers.0.w'].description, 'jax' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == ("9 recorded P('data', 'model') on data=2×model=4 False")


@settings(max_examples=15)
@given(st.lists(_specs(), min_size=1, max_size=5))
def test_property_tree_bytes_per_device_match_jax(mesh, specs):
    tree = {f"x{i}": [_put(mesh, shape, spec)] for i, (shape, spec) in enumerate(specs)}
    p = tt.placement(tree)
    want: Counter = Counter()
    count: Counter = Counter()
    for _, x in _jax_leaves(tree):
        for s in x.addressable_shards:
            want[s.device] += s.data.nbytes
            count[s.device] += 1
    assert {d: u.bytes for d, u in p.per_device.items()} == dict(want)
    assert {d: u.leaves for d, u in p.per_device.items()} == dict(count)
    assert [str(q) for q in p.leaves] == [f"['x{i}'][0]" for i in range(len(specs))]


def test_is_leaf_makes_object_leaves(model):
    p = tt.placement(model, is_leaf=lambda x: isinstance(x, list))
    assert p["layers"].kind == "object"
    assert len(p.leaves) == 6
    assert sum(u.leaves for u in p.per_device.values()) == 8 + 1 + 8 + 1  # embed, head, scale, step


def test_grid_truncates_wide_meshes(placed):
    text = _text(ShardingGrid(placed["embed"], max_cols=3))
    assert "│ dim 0 │  0:4  │  4:8  │ 8:12  │" in text
    assert "… 5 more columns" in text


def test_memory_kind_is_reported(mesh):
    x = jax.device_put(
        np.ones((8, 4), np.float32), NamedSharding(mesh, P("data"), memory_kind="pinned_host")
    )
    lp = tt.placement({"x": x})["x"]
    assert lp.memory_kind == "pinned_host" == x.sharding.memory_kind
    assert lp.description == "P('data',) on data=2×model=4 [pinned_host]"
    assert lp.bytes_per_device == {s.device: s.data.nbytes for s in x.addressable_shards}
