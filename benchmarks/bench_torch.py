"""`treetool ls` of PyTorch checkpoints vs torch itself and vs a safetensors header read.

One run writes its files under a temporary directory (deleted at the end): a 1 GB torch zip
`.pt` of 64 float32 tensors, the same tensors in the legacy format and as safetensors, and a
4-shard `pytorch_model.bin.index.json` set. Each command runs as a fresh process (best of
`--repeat` wall times, taken in turns with what it is compared to) with its peak RSS (wait4):

- `treetool ls model.pt` vs `torch.load(p)` and `torch.load(p, mmap=True)` (targets: < 0.3 s
  and < 100 MB for treetool, whatever the file's size), and vs a safetensors header read of
  the same tensors (`safe_open(...).keys()` and shapes); `python -c pass` is the interpreter's
  own start-up. treetool's modules are compiled to bytecode first, as an installed package's
  are; `(no bytecode)` is the same `ls` when every module is compiled from source at each
  start (`PYTHONDONTWRITEBYTECODE=1` and no `__pycache__`, as in a fresh checkout where
  writing bytecode is off);
- `treetool ls legacy.pt` vs `torch.load(p)` (torch cannot memory-map the legacy format);
- the bytes `treetool.io.read` reads from the zip (target: < 1% of the file), from
  /proc/self/io;
- the sharded set over the local ranged HTTP server of the tests: requests counted.

Ratios are printed beside the figures; every figure of one table comes from the same run.

    python benchmarks/bench_torch.py [--size-mb 1024] [--repeat 3] [--quick]

`--quick`: a 64 MiB file, best of 2 (the < 0.3 s and < 100 MB targets hold whatever the size).
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _rows

TREETOOL = [sys.executable, "-m", "treetool.cli"]

# a small launcher measures the child: a child forked from this (big) process would report
# this process's peak RSS
_LAUNCHER = """
import os, subprocess, sys, time
t0 = time.perf_counter()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
_, status, usage = os.wait4(p.pid, 0)
wall = time.perf_counter() - t0
err = p.stderr.read().decode()
code = os.waitstatus_to_exitcode(status)
print(wall, usage.ru_maxrss / 1024, code)
if code:
    print(err, file=sys.stderr)
"""


def run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall time (s) of a fresh process running `cmd`, and its peak RSS (MB)."""
    out = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, *cmd], capture_output=True, text=True, env=env
    )
    wall, rss, code = out.stdout.split()
    if int(code) != 0:
        raise SystemExit(f"command failed ({code}): {' '.join(cmd)}\n{out.stderr}")
    return float(wall), float(rss)


def in_turns(
    cmds: dict[str, list[str]], repeat: int, envs: dict[str, dict[str, str]] | None = None
) -> dict[str, tuple[float, float]]:
    """Best of `repeat` for each command, the commands taken in turns (noise hits all alike)."""
    best = {k: (float("inf"), 0.0) for k in cmds}
    for _ in range(repeat):
        for k, cmd in cmds.items():
            best[k] = min(best[k], run(cmd, (envs or {}).get(k)))
    return best


def no_bytecode_env(d: str) -> dict[str, str]:
    """An environment in which every module is compiled from source at each start: bytecode
    is looked for (and not written) under an empty folder."""
    empty = os.path.join(d, "no-pycache")
    os.makedirs(empty, exist_ok=True)
    return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": empty}


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def write_files(d: str, size_mb: int) -> dict[str, str]:
    import torch
    from safetensors.torch import save_file

    n = 64
    per = size_mb * (1 << 20) // n // 4  # float32 elements per tensor
    cols = 1024
    g = torch.Generator().manual_seed(0)
    sd = {f"layers.{i}.weight": torch.randn(per // cols, cols, generator=g) for i in range(n)}
    paths = {"zip": os.path.join(d, "model.pt"), "legacy": os.path.join(d, "legacy.pt"),
             "safetensors": os.path.join(d, "model.safetensors")}  # fmt: skip
    torch.save(sd, paths["zip"])
    torch.save(sd, paths["legacy"], _use_new_zipfile_serialization=False)
    save_file(sd, paths["safetensors"])
    shards = os.path.join(d, "set")
    os.makedirs(shards)
    weight_map = {}
    names = list(sd)
    for i in range(4):
        shard = f"pytorch_model-{i + 1:05d}-of-00004.bin"
        part = names[i * 16 : (i + 1) * 16]
        torch.save({k: sd[k][:64] for k in part}, os.path.join(shards, shard))
        weight_map.update(dict.fromkeys(part, shard))
    with open(os.path.join(shards, "pytorch_model.bin.index.json"), "w") as fh:
        json.dump({"metadata": {}, "weight_map": weight_map}, fh)
    paths["sharded"] = shards
    return paths


_BYTES_READ = """
import sys, treetool.io as tio
def rchar():
    return int(dict(l.split(': ') for l in open('/proc/self/io').read().splitlines())['rchar'])
tio.read(sys.argv[2])  # the modules a read imports are read once, before
before = rchar(); tio.read(sys.argv[1]); print(rchar() - before)
"""


def bytes_read(path: str, warm: str) -> int:
    out = subprocess.run([sys.executable, "-c", _BYTES_READ, path, warm], capture_output=True,
                         text=True, check=True)  # fmt: skip
    return int(out.stdout)


def http_requests(shards: str) -> tuple[int, int]:
    """(requests to list the sharded set over HTTP, shards)."""
    spec = importlib.util.spec_from_file_location(
        "storage_servers", os.path.join(ROOT, "tests", "remote", "storage_servers.py")
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules["storage_servers"] = mod
    spec.loader.exec_module(mod)
    server = mod.HttpServer(shards)
    try:
        import treetool.io as tio

        server.log.clear()
        tio.read(f"{server.url}/pytorch_model.bin.index.json")
        return server.log.count, 4
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="--size-mb 64 --repeat 2")
    _rows.add_argument(ap)
    args = ap.parse_args()
    if args.quick:
        args.size_mb, args.repeat = 64, 2
    d = tempfile.mkdtemp(prefix="bench_torch_")
    compileall.compile_dir(os.path.join(ROOT, "treetool"), quiet=1)  # as an installed package
    try:
        p = write_files(d, args.size_mb)
        size = os.path.getsize(p["zip"])
        st_header = (
            "from safetensors import safe_open\n"
            f"with safe_open({p['safetensors']!r}, 'np') as f:\n"
            "    [f.get_slice(k).get_shape() for k in f.keys()]"
        )
        zip_rows = in_turns(
            {
                "treetool ls model.pt": [*TREETOOL, "ls", p["zip"]],
                "torch.load(p)": py(f"import torch; torch.load({p['zip']!r})"),
                "torch.load(p, mmap=True)": py(
                    f"import torch; torch.load({p['zip']!r}, mmap=True)"
                ),
                "safetensors header read": py(st_header),
                "python -c pass": py("pass"),
                "treetool ls (no bytecode)": [*TREETOOL, "ls", p["zip"]],
            },
            args.repeat,
            {"treetool ls (no bytecode)": no_bytecode_env(d)},
        )
        legacy_rows = in_turns(
            {
                "treetool ls legacy.pt": [*TREETOOL, "ls", p["legacy"]],
                "torch.load(legacy)": py(f"import torch; torch.load({p['legacy']!r})"),
            },
            args.repeat,
        )
        small = os.path.join(p["sharded"], "pytorch_model-00001-of-00004.bin")
        read = bytes_read(p["zip"], small)
        requests, shards = http_requests(p["sharded"])
    finally:
        shutil.rmtree(d, ignore_errors=True)

    print(
        f"torch zip of 64 tensors, {size / 2**30:.2f} GiB; best of {args.repeat}, fresh processes"
    )
    tt = zip_rows["treetool ls model.pt"]
    print(f"{'command':28} {'wall s':>8} {'peak MB':>8} {'time / treetool':>16}")
    for name, (wall, rss) in zip_rows.items():
        print(f"{name:28} {wall:8.3f} {rss:8.0f} {wall / tt[0]:15.1f}x")
    lt = legacy_rows["treetool ls legacy.pt"]
    for name, (wall, rss) in legacy_rows.items():
        print(f"{name:28} {wall:8.3f} {rss:8.0f} {wall / lt[0]:15.1f}x")
    print(
        f"bytes treetool.io.read read from the zip: {read:,} ({100 * read / size:.4f}% of the file)"
    )
    print(
        f"sharded .bin set over HTTP: {requests} requests for {shards} shards (target <= 3 + {shards})"
    )
    work = f"treetool ls of a torch zip .pt ({size / 2**30:.2f} GiB, 64 tensors)"
    note = f"{read / size:.4%} of the file read; best of {args.repeat} fresh processes"
    for anchor, goal in (
        ("torch.load(p)", ("s<", 0.3)),
        ("torch.load(p, mmap=True)", None),
        ("safetensors header read", None),
    ):
        _rows.row(work, anchor, zip_rows[anchor][0], tt[0], goal, peak_mb=tt[1], note=note)
    _rows.row(f"{work}: peak memory", "torch.load(p)", zip_rows["torch.load(p)"][0], tt[0],
              ("mb<", 100), peak_mb=tt[1])  # fmt: skip
    nb = zip_rows["treetool ls (no bytecode)"]
    _rows.row(f"{work}, no bytecode cache", "torch.load(p)", zip_rows["torch.load(p)"][0], nb[0],
              peak_mb=nb[1], note="every module compiled from source at the start")  # fmt: skip
    _rows.row("treetool ls of a legacy torch .pt (same tensors)", "torch.load(legacy)",
              legacy_rows["torch.load(legacy)"][0], lt[0], ("s<", 0.3), peak_mb=lt[1])  # fmt: skip
    _rows.row(f"sharded .bin set over HTTP (loopback), {shards} shards", None, None, None,
              note=f"{requests} requests (target <= 3 + {shards})")  # fmt: skip
    _rows.dump(args.rows_json)


if __name__ == "__main__":
    main()
