"""Write the fuzzing seed corpus, `fuzz/corpus/<format>/`, with the real libraries.

Every seed is a small file written by the library users save with (numpy, safetensors, flax,
equinox, pickle/cloudpickle, orbax), a few KB at most, so that the fuzzer starts from the
structures treetool really meets. Run it from the repository root; it replaces the corpus:

    .venv/bin/python fuzz/make_corpus.py            # every format
    .venv/bin/python fuzz/make_corpus.py pickle npz # only these

The orbax seeds are checkpoints written by orbax (without OCDBT, so that the zarr metadata are
plain files), packed into the harness's orbax input form: the checkpoint's metadata files
(`_METADATA`, `_CHECKPOINT_METADATA`, `_sharding`, `<param>/.zarray`, …) as sections joined
by `harness.ORBAX_SEP`.
"""

from __future__ import annotations

import collections
import io
import os
import pickle
import shutil
import sys
import tempfile
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
#: the orbax files a seed carries (array chunks are left out: the reader never opens them)
_ORBAX_MAX_FILE = 4096

Point = collections.namedtuple("Point", ["x", "y"])


def _arrays() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    return {
        "dense": {
            "kernel": rng.standard_normal((3, 4)).astype(np.float32),
            "bias": np.zeros(4, np.float32),
        },
        "embed": rng.integers(-5, 5, (2, 3)).astype(np.int8),
        "mask": np.array([True, False, True]),
        "scale": np.float64(0.5),
        "count": np.array(7, np.int64),
    }


def _plain_tree() -> dict[str, Any]:
    """Builtin containers and numpy arrays: what pickle files of params look like."""
    return {
        "params": _arrays(),
        "step": 1200,
        "lr": 3e-4,
        "name": "run-α",
        "tags": ["a", "b"],
        "shape": (2, 3),
        "flags": {True, None},
        "frozen": frozenset({1, 2}),
        "raw": b"\x00\x01",
        "ordered": collections.OrderedDict(b=1, a=2),
        "point": Point(1.0, 2.0),
        "complex": 1 + 2j,
        "big": 2**70,
        "shared": [np.ones(2, np.float16)] * 2,
        "fortran": np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)),
        "be": np.arange(3, dtype=">i4"),
    }


def _eqx_model() -> Any:
    import equinox as eqx
    import jax

    return eqx.nn.MLP(in_size=2, out_size=2, width_size=4, depth=1, key=jax.random.PRNGKey(0))


def _optax_state(params: Any) -> Any:
    import equinox as eqx
    import optax

    return optax.adam(1e-3).init(eqx.filter(params, eqx.is_array))


def pickles() -> dict[str, bytes]:
    """Protocols 0-5 of a plain tree; cloudpickle of an equinox model and its optax state."""
    import cloudpickle

    out = {f"plain-p{p}.pkl": pickle.dumps(_plain_tree(), protocol=p) for p in range(6)}
    out["numpy-array-p2.pkl"] = pickle.dumps(np.arange(4, dtype=np.float32), protocol=2)
    out["object-array-p4.pkl"] = pickle.dumps(np.array([1, "a", None], dtype=object), protocol=4)
    model = _eqx_model()
    out["eqx-mlp-cloudpickle.pkl"] = cloudpickle.dumps(model)
    out["eqx-mlp-optax-cloudpickle.pkl"] = cloudpickle.dumps(
        {"model": model, "opt_state": _optax_state(model), "step": 3}
    )
    out["optax-state-p5.pkl"] = pickle.dumps(_optax_state(model), protocol=5)
    # shapes hostile files take, small: tuples nested as dict keys, a list shared at every level
    # (each level multiplies the leaves a walk meets), a self-referencing list
    key: Any = ("k",)
    for _ in range(4):
        key = (key, 1)
    out["tuple-keys-p4.pkl"] = pickle.dumps({key: 1, (2, (3,)): [key]}, protocol=4)
    shared: Any = [np.zeros(1, np.float32)]
    for _ in range(4):
        shared = [shared] * 4
    out["shared-refs-p4.pkl"] = pickle.dumps({"w": shared}, protocol=4)
    loop: list[Any] = [1]
    loop.append(loop)
    out["self-reference-p2.pkl"] = pickle.dumps(loop, protocol=2)
    return out


def npys() -> dict[str, bytes]:
    """`np.save` of arrays of several dtypes, orders and ranks."""
    arrays = {
        "f32-2x3.npy": np.arange(6, dtype=np.float32).reshape(2, 3),
        "i8.npy": np.array([-1, 0, 1], np.int8),
        "bool.npy": np.array([True, False]),
        "scalar-f64.npy": np.array(2.5),
        "be-i4.npy": np.arange(4, dtype=">i4"),
        "fortran-i2.npy": np.asfortranarray(np.arange(6, dtype=np.int16).reshape(3, 2)),
        "c64.npy": np.array([1 + 1j], np.complex64),
        "empty-0x3.npy": np.zeros((0, 3), np.float32),
        "str-U3.npy": np.array(["ab", "c"]),
        "record.npy": np.zeros(2, dtype=[("a", "<i4"), ("b", "<f2", (2,))]),
        "object.npy": np.array([1, "a", None], dtype=object),
    }
    out = {}
    for name, arr in arrays.items():
        buf = io.BytesIO()
        np.save(buf, arr, allow_pickle=True)
        out[name] = buf.getvalue()
    return out


def npzs() -> dict[str, bytes]:
    """`np.savez` and `np.savez_compressed` of flat and path-keyed arrays."""
    flat = {"['dense']['kernel']": _arrays()["dense"]["kernel"], "['step']": np.array(3)}
    plain = {"a": np.arange(3, dtype=np.float32), "b": np.ones((2, 2), np.int8)}
    out = {}
    for name, arrays, save in (
        ("savez-plain.npz", plain, np.savez),
        ("savez-paths.npz", flat, np.savez),
        ("savez-compressed.npz", plain, np.savez_compressed),
        ("savez-positional.npz", None, np.savez),
    ):
        buf = io.BytesIO()
        if arrays is None:
            save(buf, np.zeros(2), np.ones(1, np.int16))
        else:
            save(buf, **arrays)
        out[name] = buf.getvalue()
    buf = io.BytesIO()
    np.savez(buf, obj=np.array([{"a": 1}], dtype=object))
    out["savez-object.npz"] = buf.getvalue()
    return out


def safetensors_files() -> dict[str, bytes]:
    """`safetensors.numpy.save` with path keys, dtypes and `__metadata__`."""
    from safetensors.numpy import save

    a = _arrays()
    tensors = {
        "params.dense.kernel": a["dense"]["kernel"],
        "params.dense.bias": a["dense"]["bias"],
        "embed": a["embed"],
        "mask": a["mask"],
        "scalar": np.array(1.5, np.float64),
        "half": np.ones((2, 1), np.float16),
    }
    import ml_dtypes

    return {
        "params.safetensors": save(tensors, metadata={"format": "np", "step": "3"}),
        "single.safetensors": save({"w": np.arange(4, dtype=np.int32)}),
        "bf16.safetensors": save({"w": np.ones(3, ml_dtypes.bfloat16)}),
        "paths.safetensors": save(
            {"['layers'][0]['w']": np.zeros(2, np.float32), "['layers'][1]['w']": np.ones(2)}
        ),
    }


def msgpacks() -> dict[str, bytes]:
    """`flax.serialization.to_bytes` of a linen model's params, an optax state and a dict."""
    import flax.linen as nn
    import jax
    import optax
    from flax import serialization

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x: Any) -> Any:
            return nn.Dense(2)(nn.relu(nn.Dense(3)(x)))

    params = MLP().init(jax.random.PRNGKey(0), np.ones((1, 2), np.float32))
    state = optax.adam(1e-3).init(params)
    return {
        "linen-params.msgpack": serialization.to_bytes(params),
        "optax-adam.msgpack": serialization.to_bytes(state),
        "mixed.msgpack": serialization.to_bytes(
            {
                "w": np.arange(3, dtype=np.float32),
                "step": 5,
                "lr": 0.1,
                "name": "x",
                "c": np.array([1 + 2j], np.complex64),
                "list": [np.zeros(1, np.int8), 2],
                "none": None,
            }
        ),
    }


def equinox_files() -> dict[str, bytes]:
    """`eqx.tree_serialise_leaves` of a small MLP and of a tree with scalars."""
    import equinox as eqx

    out = {}
    with tempfile.TemporaryDirectory() as d:
        for name, tree in (
            ("mlp.eqx", _eqx_model()),
            ("scalars.eqx", {"w": np.ones((2, 2), np.float32), "n": 3, "x": 0.5, "b": True}),
        ):
            path = os.path.join(d, name)
            eqx.tree_serialise_leaves(path, tree)
            with open(path, "rb") as fh:
                out[name] = fh.read()
    return out


def _pack_dir(root: str) -> bytes:
    sys.path.insert(0, HERE)
    from harness import ORBAX_SEP

    sections = []
    for dirpath, _, files in sorted(os.walk(root)):
        for f in sorted(files):
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            if os.path.getsize(path) > _ORBAX_MAX_FILE:
                continue
            with open(path, "rb") as fh:
                content = fh.read()
            # zarr chunks are binary and never read: the metadata files are JSON text, and an
            # OCDBT database's manifest and B+tree nodes (`d/...`) hold the zarr metadata
            ocdbt = f == "manifest.ocdbt" or rel.startswith("d/")
            if f.startswith(("_", ".")) or f.endswith((".json", ".txt")) or ocdbt:
                sections.append(rel.encode() + b"\n" + content)
    return ORBAX_SEP.join(sections)


def orbaxes() -> dict[str, bytes]:
    """An item written by a `PyTreeCheckpointer`, a `CheckpointManager` run of two steps, and
    an item in an OCDBT database (its manifest and root B+tree node, decoded by treetool)."""
    import jax.numpy as jnp
    import orbax.checkpoint as ocp

    tree = {
        "params": {
            "dense": {"kernel": jnp.ones((3, 4)), "bias": jnp.zeros(4, jnp.bfloat16)},
            "layers": [jnp.arange(3), jnp.ones((2,), jnp.int8)],
        },
        "step": 3,
        "name": None,
    }
    out = {}
    with tempfile.TemporaryDirectory() as d:
        item = os.path.join(d, "item")
        ocp.Checkpointer(ocp.PyTreeCheckpointHandler(use_ocdbt=False)).save(item, tree)
        out["pytree-item.orbax"] = _pack_dir(item)
        run = os.path.join(d, "run")
        options = ocp.CheckpointManagerOptions(max_to_keep=2)
        with ocp.CheckpointManager(
            run,
            options=options,
            item_handlers=ocp.PyTreeCheckpointHandler(use_ocdbt=False),
        ) as mngr:
            for step in (1, 2):
                mngr.save(step, args=ocp.args.PyTreeSave({"w": jnp.full((2,), step), "step": step}))
            mngr.wait_until_finished()
        out["manager-run.orbax"] = _pack_dir(run)
        ocdbt = os.path.join(d, "ocdbt")  # orbax's default: the metadata in an OCDBT database
        ocp.Checkpointer(ocp.PyTreeCheckpointHandler(use_ocdbt=True)).save(ocdbt, tree)
        out["ocdbt-item.orbax"] = _pack_dir(ocdbt)
    return out


def torch_files() -> dict[str, bytes]:
    """Small torch files, zip and legacy: views, ties, dtypes, an optimizer state, a module."""
    import torch

    w = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    sd = {"w": w, "t": w.t(), "col": w[:, 1], "tied": w, "b": torch.ones(2, dtype=torch.bfloat16)}
    more = {"u": torch.tensor([1, 2]).to(torch.uint16), "f8": torch.zeros(2, dtype=torch.float8_e4m3fn),
            "s": torch.tensor(2.0), "e": torch.zeros(0, 2), "p": torch.nn.Parameter(torch.ones(2))}  # fmt: skip
    lin = torch.nn.Linear(2, 2)
    opt = torch.optim.Adam(lin.parameters())
    lin(torch.ones(1, 2)).sum().backward()
    opt.step()
    out: dict[str, bytes] = {}
    for name, obj, zipped in (
        ("views-zip.pt", sd, True),
        ("views-legacy.pt", sd, False),
        ("dtypes-zip.pt", more, True),
        ("adam-zip.pt", opt.state_dict(), True),
        ("module-legacy.pt", lin, False),
    ):
        buf = io.BytesIO()
        torch.save(obj, buf, _use_new_zipfile_serialization=zipped)
        out[name] = buf.getvalue()
    return out


#: corpus directory -> the function that makes its seeds
MAKERS = {
    "pickle": pickles,
    "npy": npys,
    "npz": npzs,
    "safetensors": safetensors_files,
    "msgpack": msgpacks,
    "equinox": equinox_files,
    "orbax": orbaxes,
    "torch": torch_files,
}


def main(formats: list[str]) -> None:
    """Replace `fuzz/corpus/<format>/` (every format by default) and print the sizes."""
    total = 0
    for fmt, make in MAKERS.items():
        if formats and fmt not in formats:
            continue
        seeds = make()
        d = os.path.join(CORPUS, fmt)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for name, data in sorted(seeds.items()):
            with open(os.path.join(d, name), "wb") as fh:
                fh.write(data)
        size = sum(len(b) for b in seeds.values())
        total += size
        print(f"{fmt:12} {len(seeds):3} seeds {size:7} bytes")
    print(f"{'total':12} {total:19} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
