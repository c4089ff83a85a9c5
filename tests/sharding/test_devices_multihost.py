"""Multi-host placement: two real JAX processes on 127.0.0.1, 4 CPU devices each.

Each process sees all 8 devices of a 2x4 mesh but holds only its own 4. The shards on the
other process's devices must be reported (bytes from the sharding, `addressable` False),
never read and never crashed on.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

_WORKER = textwrap.dedent(
    """
    import json, os, sys
    import numpy as np
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    pid, port = int(sys.argv[1]), sys.argv[2]
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=pid,
        initialization_timeout=60,
    )
    import treetool as tt
    from treetool._sharding._layout import device_name
    from treetool._sharding._rich import PlacementView
    from rich.console import Console
    import io

    mesh = jax.make_mesh((2, 4), ("data", "model"))
    g = np.arange(128, dtype=np.float32).reshape(8, 16)
    w = jax.make_array_from_callback(g.shape, NamedSharding(mesh, P("data", "model")), lambda i: g[i])
    r = jax.make_array_from_callback((8,), NamedSharding(mesh, P()), lambda i: np.ones(8, np.float32)[i])
    local = jax.device_put(np.ones(4, np.float32), jax.local_devices()[0])
    tree = {"w": w, "r": r, "local": local}
    p = tt.placement(tree)

    def block_bytes(x, index):  # a block's bytes, from the index jax gives its shard
        n = [len(range(*sl.indices(dim))) for sl, dim in zip(index, x.shape)]
        return int(np.prod(n)) * x.dtype.itemsize

    want = {}
    for x in (w, r, local):
        for s in x.global_shards:
            name = device_name(s.device)
            want[name] = want.get(name, 0) + (s.data.nbytes if s.data is not None else block_bytes(x, s.index))
    console = Console(width=140, color_system=None, file=io.StringIO())
    console.print(PlacementView(p))
    console.print(p.grid("w"))
    out = {
        "process": jax.process_index(),
        "devices": [
            [u.name, u.addressable, u.bytes, u.leaves] for u in p.per_device.values()
        ],
        "want": want,
        "local_names": sorted(device_name(d) for d in jax.local_devices()),
        "w_fully_addressable": p["w"].fully_addressable,
        "jax_w_fully_addressable": w.is_fully_addressable,
        "local_kind": p["local"].kind,
        "dict_ok": json.loads(json.dumps(p.to_dict()))["devices"] == p.to_dict()["devices"],
        "text": console.file.getvalue(),
    }
    print("RESULT " + json.dumps(out), flush=True)
    jax.distributed.shutdown()
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    script = tmp_path_factory.mktemp("multihost") / "worker.py"
    script.write_text(_WORKER)
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
        "JAX_PLATFORMS": "cpu",
    }
    port = str(_free_port())
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(i), port],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    outs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            outs.append((proc.returncode, out, err))
    except subprocess.TimeoutExpired:
        for proc in procs:
            proc.kill()
        pytest.fail("the two JAX processes did not finish within 120 s")
    results = []
    for rc, out, err in outs:
        assert rc == 0, f"worker failed (exit {rc}):\n{err[-3000:]}"
        line = next(x for x in out.splitlines() if x.startswith("RESULT "))
        results.append(json.loads(line[len("RESULT ") :]))
    return results


def test_both_processes_see_all_devices(results):
    assert [r["process"] for r in results] == [0, 1]
    for r in results:
        names = [d[0] for d in r["devices"]]
        assert len(names) == 8
        assert sorted(n for n, addressable, *_ in r["devices"] if addressable) == r["local_names"]
        assert len(r["local_names"]) == 4


def test_bytes_per_device_equal_jax_global_shards(results):
    for r in results:
        got = {name: nbytes for name, _, nbytes, _ in r["devices"]}
        assert got == r["want"]


def test_remote_shards_are_reported_not_read(results):
    for r in results:
        assert r["w_fully_addressable"] is False
        assert r["jax_w_fully_addressable"] is False
        assert r["local_kind"] == "single"
        assert r["dict_ok"] is True
        remote = [d for d in r["devices"] if not d[1]]
        assert len(remote) == 4
        # every remote device holds one 4x4 block of w (64 B) and a copy of r (32 B)
        assert all(d[2] == 96 and d[3] == 2 for d in remote)
        text = r["text"]
        assert "* not addressable from this process (bytes from the sharding)" in text
        assert "* not addressable from this process" in text.split("['w']  f32[8,16]")[-1]
