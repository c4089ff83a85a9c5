"""Real local servers (moto S3, gcp-storage-emulator, a ranged HTTP server) and real files.

The servers start once per session on 127.0.0.1 at free ports; the checkpoint files are written
by the real libraries (safetensors, flax, numpy, pickle, equinox) into a local folder and
uploaded to each server, and the orbax runs by orbax itself straight to each bucket, so every
test compares a remote read with the same checkpoint read locally.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from storage_servers import BUCKET, GcsServer, HttpServer, S3Server, environment

#: what the servers and clients need: a test here is skipped, with the reason, without them
_NEEDED = {
    "moto.server": "moto[server] (the S3 server)",
    "werkzeug": "werkzeug (moto's server)",
    "boto3": "boto3 (uploads to the S3 server)",
    "gcp_storage_emulator": "gcp-storage-emulator (the GCS server)",
    "obstore": "obstore (treetool[remote], s3://)",
    "gcsfs": "gcsfs (treetool[remote], gs://)",
}


def _missing() -> list[str]:
    import importlib.util

    out = []
    for mod, what in _NEEDED.items():
        try:
            found = importlib.util.find_spec(mod) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            out.append(what)
    return out


MISSING = _missing()


@pytest.fixture(scope="session", autouse=True)
def _servers_installed() -> None:
    """First of the session's fixtures: no server starts when a package is missing."""
    if MISSING:
        pytest.skip(f"not installed: {', '.join(MISSING)}")


def _rng_tree() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "model.embed.weight": rng.standard_normal((64, 16)).astype(np.float32),
        "model.layers.0.attn.weight": rng.standard_normal((16, 16)).astype(np.float32),
        "model.layers.0.attn.bias": np.arange(16, dtype=np.float16),
        "model.layers.1.attn.weight": rng.standard_normal((16, 16)).astype(np.float32),
        "model.layers.1.attn.bias": np.zeros(16, dtype=np.float16),
        "model.norm.scale": np.ones(16, dtype=np.float32),
        "lm_head.weight": rng.standard_normal((16, 64)).astype(np.float32),
        "step": np.array(12, dtype=np.int64),
    }


def _write_files(root: str) -> dict[str, Any]:
    """Every checkpoint the tests read, made by the real libraries; returns facts about them."""
    import equinox as eqx
    import jax
    from flax.serialization import to_bytes
    from safetensors.numpy import save_file

    tensors = _rng_tree()
    names = list(tensors)
    # a safetensors set of 3 shards and its index, as transformers writes it
    shards = [names[:3], names[3:6], names[6:]]
    weight_map = {}
    for i, group in enumerate(shards, 1):
        fname = f"model-{i:05d}-of-00003.safetensors"
        save_file({k: tensors[k] for k in group}, os.path.join(root, fname))
        weight_map.update(dict.fromkeys(group, fname))
    total = sum(a.nbytes for a in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    with open(os.path.join(root, "model.safetensors.index.json"), "w") as fh:
        json.dump(index, fh, indent=2)
    # the same set with one shard missing from the folder
    with open(os.path.join(root, "broken.safetensors.index.json"), "w") as fh:
        json.dump({"metadata": {}, "weight_map": {"x": "model-00009-of-00009.safetensors"}}, fh)
    # one safetensors file with all tensors
    save_file(tensors, os.path.join(root, "model.safetensors"))
    # flax msgpack shards of "a/b/c" keys (transformers' flax_shard_checkpoint) and the index
    flax_params = {
        "params/Dense_0/kernel": tensors["model.layers.0.attn.weight"],
        "params/Dense_0/bias": tensors["model.norm.scale"],
        "params/Dense_1/kernel": tensors["lm_head.weight"],
    }
    fmap = {}
    for i, keys in enumerate(
        [["params/Dense_0/kernel", "params/Dense_0/bias"], ["params/Dense_1/kernel"]], 1
    ):
        fname = f"flax_model-{i:05d}-of-00002.msgpack"
        with open(os.path.join(root, fname), "wb") as fh:
            fh.write(to_bytes({k: flax_params[k] for k in keys}))
        fmap.update(dict.fromkeys(keys, fname))
    with open(os.path.join(root, "flax_model.msgpack.index.json"), "w") as fh:
        json.dump({"metadata": {"total_size": 0}, "weight_map": fmap}, fh)
    # npz: stored and compressed
    np.savez(
        os.path.join(root, "arrays.npz"), **{k.replace(".", "_"): v for k, v in tensors.items()}
    )
    np.savez_compressed(os.path.join(root, "small.npz"), a=np.arange(2000, dtype=np.int32))
    # a pickle of a nested dict of arrays
    ckpt = {"params": {"w": tensors["model.embed.weight"], "b": tensors["model.norm.scale"]},
            "opt": [tensors["lm_head.weight"], 3], "step": 7}  # fmt: skip
    with open(os.path.join(root, "ckpt.pkl"), "wb") as fh:
        pickle.dump(ckpt, fh, protocol=4)
    # a pickle whose last array lies past the first block read
    rng = np.random.default_rng(1)
    big = {k: rng.standard_normal(50_000).astype(np.float32) for k in ("a", "b", "c")}
    with open(os.path.join(root, "big.pkl"), "wb") as fh:
        pickle.dump(big, fh, protocol=4)
    # two pickles that differ in one leaf (value diff)
    other = {**ckpt, "params": {**ckpt["params"], "b": ckpt["params"]["b"] + 1}}
    with open(os.path.join(root, "ckpt2.pkl"), "wb") as fh:
        pickle.dump(other, fh, protocol=4)
    # equinox serialised leaves
    model = eqx.nn.MLP(4, 2, 8, 2, key=jax.random.PRNGKey(0))
    eqx.tree_serialise_leaves(os.path.join(root, "mlp.eqx"), model)
    return {"tensors": tensors, "flax": flax_params, "mlp": model, "big": big}


@pytest.fixture(scope="session")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = str(tmp_path_factory.mktemp("remote_files"))
    facts = _write_files(root)
    facts["root"] = root
    facts["names"] = sorted(os.listdir(root))
    return facts


@pytest.fixture(scope="session")
def s3_server(files: dict[str, Any]) -> Any:
    server = S3Server()
    client = server.client()
    client.create_bucket(Bucket=BUCKET)
    for name in files["names"]:
        client.upload_file(os.path.join(files["root"], name), BUCKET, f"run/{name}")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def gcs_server(files: dict[str, Any]) -> Any:
    server = GcsServer()
    server.create_bucket(BUCKET)
    for name in files["names"]:
        with open(os.path.join(files["root"], name), "rb") as fh:
            server.upload(BUCKET, f"run/{name}", fh.read())
    yield server
    server.stop()


def orbax_tree(step: int) -> dict[str, Any]:
    """The tree each step of the orbax runs saves (step 2 differs from step 1 in `w`)."""
    import jax.numpy as jnp

    return {
        "params": {
            "w": jnp.arange(24.0, dtype=jnp.float32).reshape(4, 6) * step,
            "b": jnp.ones(6, jnp.bfloat16),
            "layers": [jnp.full((3,), 7, jnp.int32), jnp.zeros((2, 2), jnp.float16)],
        },
        "step": jnp.asarray(step, jnp.int32),
    }


def _save_run(directory: Any) -> None:
    """A CheckpointManager run of 2 steps, saved by orbax itself at `directory`."""
    import orbax.checkpoint as ocp

    with ocp.CheckpointManager(directory) as mngr:
        for step in (1, 2):
            mngr.save(step, args=ocp.args.StandardSave(orbax_tree(step)))
        mngr.wait_until_finished()


@pytest.fixture(scope="session")
def orbax_local(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The same run written to a local folder: what each remote read is compared with."""
    root = str(tmp_path_factory.mktemp("orbax_local"))
    _save_run(os.path.join(root, "orbax_run"))
    return os.path.join(root, "orbax_run")


@pytest.fixture(scope="session")
def s3_orbax(s3_server: Any) -> str:
    """The orbax run written by orbax's CheckpointManager straight to the S3 server: its
    metadata files and its commit (the rename of `N.orbax-checkpoint-tmp` to `N`: copies,
    then deletes) through etils' s3fs backend, its arrays through tensorstore's `s3` kvstore,
    all pointed at the server by the standard AWS environment (`AWS_ENDPOINT_URL`...).

    orbax 0.12.8 cannot do it alone, so the save runs inside `_orbax_s3.orbax_s3_writes()`,
    which replaces four orbax functions for its duration (its docstring has the detail):
    `tensorstore_utils._normalize_path` (`orbax/checkpoint/_src/serialization/
    tensorstore_utils.py:218`, its `os.path.normpath` turns `s3://ckpts/run` into
    `s3:/ckpts/run`), `tensorstore_utils._use_gcs_driver` (:211) and
    `gcs_utils.get_kvstore_for_gcs` (`_src/path/gcs_utils.py:111`): with them
    `_build_ocdbt_kvstore_tspec` (:352-370) gives an `s3://` path tensorstore's `s3` kvstore
    instead of the `file` driver; and `async_path.rename` (`_src/path/async_path.py:116`):
    etils' rename is fsspec's `mv(recursive=True)`, which also copies the directories S3 only
    infers and fails on the first (NoSuchKey, fsspec/s3fs#394). Upstream fix in one sentence:
    keep `s3://` in `_normalize_path` and give it an `s3` base kvstore as `gs://` gets its
    `gcs` one (and have fsspec's `mv` skip inferred directories).
    """
    from _orbax_s3 import orbax_s3_writes
    from etils import epath

    try:
        with environment(s3_env(s3_server)), orbax_s3_writes():
            _save_run(epath.Path(f"s3://{BUCKET}/orbax_run"))
    finally:
        _fresh_clients()
    return f"s3://{BUCKET}/orbax_run"


@pytest.fixture(scope="session")
def gs_orbax(gcs_server: Any) -> str:
    """The orbax run written by orbax's CheckpointManager straight to the GCS emulator: its
    metadata files through etils' gcsfs backend (`STORAGE_EMULATOR_HOST`), its arrays through
    tensorstore's `gcs` kvstore (`TENSORSTORE_GCS_HTTP_URL`)."""
    import fsspec
    import gcsfs.core
    from etils import epath

    # gcsfs's default filesystem first asks the bucket's layout over gRPC, which the emulator
    # does not speak (60 s until it gives up): orbax's metadata goes through the plain client
    fsspec.register_implementation("gs", gcsfs.core.GCSFileSystem, clobber=True)
    fsspec.register_implementation("gcs", gcsfs.core.GCSFileSystem, clobber=True)
    emulator = {
        "STORAGE_EMULATOR_HOST": gcs_server.host,
        "TENSORSTORE_GCS_HTTP_URL": gcs_server.host,
    }
    try:
        with environment(emulator):
            _save_run(epath.Path(f"gs://{BUCKET}/orbax_run"))
    finally:
        _fresh_clients()
    return f"gs://{BUCKET}/orbax_run"


@pytest.fixture(scope="session")
def http_server(files: dict[str, Any]) -> Any:
    server = HttpServer(files["root"])
    yield server
    server.stop()


def _fresh_clients() -> None:
    from treetool.io._sources import _remote as _remote

    _remote._fs_cache.clear()


@pytest.fixture
def s3(s3_server: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The S3 server, with the standard AWS environment pointing at it; log cleared."""
    for k, v in s3_env(s3_server).items():
        monkeypatch.setenv(k, v)
    _fresh_clients()
    s3_server.log.clear()
    yield s3_server
    _fresh_clients()


def s3_env(server: Any) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": server.endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def period_two_stops(size: int) -> list[int]:
    """Offsets a walk jumps to in a file of `size` bytes, in a period of two jumps (70,000
    and 30,000 bytes, each past a 16 KiB block), from 100,000 to 16 KB before the end."""
    pattern = [70_000, 30_000]
    stops: list[int] = []
    at = 100_000
    while at + 4 < size - 16_000:
        stops.append(at)
        at += pattern[len(stops) % 2]
    return stops


def cli(*args: str, cwd: str, env: dict[str, str] | None = None) -> Any:
    """`treetool ARGS` in a subprocess (this environment plus `env`, HOME and TMPDIR at `cwd`):
    its `subprocess.CompletedProcess`, text."""
    from cli_runner import treetool

    return treetool(
        *args, cwd=cwd, env={**(env or {}), "HOME": cwd, "TMPDIR": cwd}, columns=None, timeout=60
    )


def cli_on_terminal(*args: str, env: dict[str, str], cwd: str) -> tuple[int, bytes, bytes]:
    """`treetool ARGS` in a subprocess whose stderr is a terminal (a pty), stdout a pipe:
    (exit code, stdout, everything written to the terminal)."""
    import pty
    import subprocess

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "treetool.cli", *args],
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
        cwd=cwd,
    )
    os.close(slave)
    stdout, _ = proc.communicate(timeout=60)
    chunks = []
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.returncode, stdout, b"".join(chunks)


@pytest.fixture
def gcs(gcs_server: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The GCS emulator, named by `STORAGE_EMULATOR_HOST`; log cleared."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_server.host)
    _fresh_clients()
    gcs_server.log.clear()
    yield gcs_server
    _fresh_clients()


@pytest.fixture
def http(http_server: Any) -> Any:
    http_server.log.clear()
    return http_server
