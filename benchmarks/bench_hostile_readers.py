"""Hostile non-pickle files, each through `treetool ls` (or `get`), vs starting Python + numpy.

The files are at the sizes issue 15 names, each through `treetool ls` (or `get`), against the
anchor of starting Python with numpy, in one run.

Issue 15's figures before the limits: shape products (100,000 dims of 2**64-1, then a 0):
safetensors 2 MB 96 s, msgpack 114 s, orbax `.zarray` 75 s, npy 26 s; amplification: 20 MB
msgpack of empty maps 4.5 GB, 150 MB orbax `_METADATA` 3.6 GB, 100 MB safetensors header 2.5 GB,
an npz of 300k members 1.25 GB; an npz object member deflating to 4 GiB copied to a temp file;
an orbax `.zarray` claiming f32[2**31] with no chunks: `get` over 6 GB. Each row prints the
exit code, wall time and peak RSS of the command, and its time over the anchor's.

    python benchmarks/bench_hostile_readers.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

import _rows
import numpy as np

HUGE = 2**64 - 1

_LAUNCHER = """
import os, subprocess, sys, time
t0 = time.perf_counter()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
err = p.stderr.read().decode("utf-8", "replace")
_, status, usage = os.wait4(p.pid, 0)
print(time.perf_counter() - t0, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status))
print(err.splitlines()[0] if err else "")
"""


def run(cmd: list[str], cwd: str) -> tuple[float, float, int, str]:
    """Wall time (s), peak RSS (MB), exit code and first stderr line of a fresh process."""
    out = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, *cmd], capture_output=True, text=True, cwd=cwd
    )
    first, line = out.stdout.split("\n", 1)
    wall, rss, code = first.split()
    return float(wall), float(rss), int(code), line.strip()


def treetool(*args: str) -> list[str]:
    return [sys.executable, "-m", "treetool.cli", *args]


def _safetensors(header: bytes) -> bytes:
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header


def _npy(header: str) -> bytes:
    h = header.encode("latin1")
    h += b" " * (-(len(h) + 13) % 64) + b"\n"
    return b"\x93NUMPY\x02\x00" + struct.pack("<I", len(h)) + h


def _zip(name: bytes, data: bytes, size: int, crc: int, method: int, repeat: int = 1) -> bytes:
    local = b"PK\x03\x04" + struct.pack(
        "<HHHHHIIIHH", 20, 0, method, 0, 0, crc, len(data), size, len(name), 0
    )
    local += name + data
    entry = b"PK\x01\x02" + struct.pack(
        "<HHHHHHIIIHHHHHII", 20, 20, 0, method, 0, 0, crc, len(data), size, len(name), 0, 0, 0,
        0, 0, 0,
    )  # fmt: skip
    central = (entry + name) * repeat
    n = min(repeat, 0xFFFF)
    end = b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, n, n, len(central), len(local), 0)
    return local + central + end


def _orbax(d: str) -> str:
    import orbax.checkpoint as ocp

    ck = os.path.join(d, "orbax")
    handler = ocp.PyTreeCheckpointHandler(use_ocdbt=False)
    ocp.Checkpointer(handler).save(ck, args=ocp.args.PyTreeSave({"w": np.ones(4, np.float32)}))
    return ck


def build(d: str, quick: bool) -> list[tuple[str, list[str]]]:
    """(label, command) for each hostile file, written under `d`."""
    scale = 10 if quick else 1
    cases: list[tuple[str, list[str]]] = []

    def put(name: str, data: bytes) -> str:
        with open(os.path.join(d, name), "wb") as fh:
            fh.write(data)
        return name

    dims = [HUGE] * 100_000 + [0]
    header = json.dumps({"w": {"dtype": "F32", "shape": dims, "data_offsets": [0, 0]}})
    f = put("dims.safetensors", _safetensors(header.encode()))
    cases.append(("safetensors 2 MB, 100k dims", treetool("ls", f)))

    items = b"".join(b"\xcf" + struct.pack(">Q", HUGE) for _ in range(100_000)) + b"\x00"
    body = b"\x93\xdd" + struct.pack(">I", 100_001) + items + b"\xa7float32\xc6\0\0\0\0"
    f = put("dims.msgpack", b"\x81\xa1w\xc9" + struct.pack(">I", len(body)) + b"\x01" + body)
    cases.append(("msgpack 0.9 MB, 100k dims", treetool("ls", f)))

    shape = ", ".join([str(HUGE)] * 40_000 + ["0"])
    f = put("dims.npy", _npy(f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({shape},), }}"))
    cases.append(("npy 0.9 MB, 40k dims", treetool("ls", f)))

    ck = _orbax(d)
    dims_ck = shutil.copytree(ck, os.path.join(d, "orbax_dims"))
    zarray = os.path.join(dims_ck, "w", ".zarray")
    with open(zarray) as fh:
        z = json.load(fh)
    z["shape"] = dims
    with open(zarray, "w") as fh:
        json.dump(z, fh)
    cases.append(("orbax .zarray 2 MB, 100k dims", treetool("ls", "orbax_dims")))

    n = 20_000_000 // scale
    f = put("maps.msgpack", b"\x81\xa1a\xdd" + struct.pack(">I", n) + b"\x80" * n)
    cases.append((f"msgpack {n / 1e6:.0f} MB of empty maps", treetool("ls", f)))

    n = 100_000_000 // scale // 3
    f = put("lists.safetensors", _safetensors(b'{"a": [' + b",".join([b"[]"] * n) + b"]}"))
    cases.append((f"safetensors header {3 * n / 1e6:.0f} MB", treetool("ls", f)))

    meta_ck = shutil.copytree(ck, os.path.join(d, "orbax_meta"))
    n = 150_000_000 // scale // 3
    with open(os.path.join(meta_ck, "_METADATA"), "wb") as fh:
        fh.write(b'{"tree_metadata": {"x": [' + b",".join([b"[]"] * n) + b"]}}")
    cases.append((f"orbax _METADATA {3 * n / 1e6:.0f} MB", treetool("ls", "orbax_meta")))

    rec = _npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }") + bytes(4)
    f = put("members.npz", _zip(b"a.npy", rec, len(rec), zlib.crc32(rec), 0, repeat=60_000))
    cases.append(("npz, 60k directory entries", treetool("ls", f)))

    gib = 1 if quick else 4
    head = _npy("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }") + b"\x80\x04N."
    comp = zlib.compressobj(1, zlib.DEFLATED, -15)
    parts, crc, size = [comp.compress(head)], zlib.crc32(head), len(head)
    zeros = bytes(64 << 20)
    for _ in range(gib * 16 - 1):  # under 4 GiB: the size fits the zip header
        parts.append(comp.compress(zeros))
        crc, size = zlib.crc32(zeros, crc), size + len(zeros)
    parts.append(comp.flush())
    data = b"".join(parts)
    f = put("object.npz", _zip(b"o.npy", data, size, crc, 8))
    cases.append((f"npz object member -> {gib} GiB", treetool("ls", f)))

    sparse = shutil.copytree(ck, os.path.join(d, "orbax_sparse"))
    zarray = os.path.join(sparse, "w", ".zarray")
    with open(zarray) as fh:
        z = json.load(fh)
    z.update(shape=[2**31], chunks=[2**31])
    with open(zarray, "w") as fh:
        json.dump(z, fh)
    for name in os.listdir(os.path.join(sparse, "w")):
        if name != ".zarray":
            os.unlink(os.path.join(sparse, "w", name))
    cases.append(("orbax f32[2**31], no chunks: get", treetool("get", "orbax_sparse", "w")))
    return cases


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="a tenth of the sizes, 1 GiB member")
    _rows.add_argument(ap)
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="treetool_hostile_", dir="/tmp")
    try:
        cases = build(d, args.quick)
        floor, floor_mb, _, _ = min(
            run([sys.executable, "-c", "import numpy"], d) for _ in range(3)
        )
        print(f"anchor: python -c 'import numpy': {floor:.3f} s, {floor_mb:.0f} MB\n")
        print(f"{'case':36s} {'rc':>3s} {'s':>7s} {'MB':>6s} {'ratio':>6s}  error line")
        for label, cmd in cases:
            wall, mb, code, line = run(cmd, d)
            line = line.replace(d + os.sep, "")  # the run's temporary folder: not news
            shown = line if len(line) <= 90 else line[:87] + "..."
            print(f"{label:36s} {code:3d} {wall:7.2f} {mb:6.0f} {wall / floor:6.1f}  {shown}")
            _rows.row(
                f"hostile file: {label.strip()}",
                "python -c 'import numpy'",
                floor,
                wall,
                peak_mb=mb,
                note=f"exit {code}: {shown}",
            )
        _rows.dump(args.rows_json)
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
