"""Remote checkpoints on local servers: treetool vs download-then-inspect, in one run.

Two servers on 127.0.0.1: moto's S3 server (as `moto_server` runs it) and a ranged HTTP
server (`tests/remote/storage_servers.py`). Requests and bytes come from the servers' request
logs, so they do not depend on the machine; wall times and peak RSS (from wait4) are of fresh
`treetool` processes against the same server, next to downloading the same files (boto3 for
S3, urllib for HTTP) and running the same command on the local copies:

- inspect (`ls`) a 16-shard safetensors set of ~1 GB through its index: requests (target <= 2
  per shard + 1 for the index), bytes read as a share of the total (target < 1%), wall time
  vs download + local (target >= 20x faster);
- inspect a ~1 GB pickle of 128 arrays: the same figures;
- value diff of two ~1 GB pickles that differ in one leaf: wall time vs download + local diff
  (target <= 1x) and peak RSS as a share of the data (target < 10%).

moto answers every ranged GET by loading the whole object (its `_handle_range_header` slices
the full value): each request costs it a copy of the object, whatever the client asks for, so
a walk of 130 small reads of a 1 GB pickle costs 130 GB of copies server-side (and boto3's
download one per 8 MB part). The benchmark's S3 server (`S3Server(fast_ranges=True)`) answers
plain ranged GETs of objects from moto's own store by a seek instead, with moto's headers;
every other request (listings, HEAD, uploads) is moto's. The S3 rows run at `--s3-scale`
(1 GB files, as the issue asks); the HTTP rows at `--scale`, at once and with `--latency`
seconds per request (a network's round trip, where reading ahead in parallel matters).

The S3 run adds an orbax checkpoint of 10,000 arrays of 100 KiB (~1 GB, as the other rows)
written by orbax's `StandardCheckpointer` straight to the bucket (orbax 0.12.8's missing
`s3://` branch applied for the save: `tests/remote/_orbax_s3.py`): `treetool ls` of it, and
its metadata read on the same `s3://` path by `treetool.io.read` and by orbax's
`StandardCheckpointer().metadata()` (time of the call in a fresh process, imports excluded).
The GCS run makes that comparison on the GCS emulator (arrays of 16 KiB there: the row is
about metadata; saved locally by orbax and uploaded unchanged).

The "s3-link" and "http-link" rows run the same tasks behind a shaped link, so that
download-then-inspect costs what it costs a user. The link model (`storage_servers.Link`,
`--link MS,MB/s,TOTAL`): 20 ms per round trip (each request waits it before its answer), 100 MB/s
per connection (a token bucket per connection: what a cloud object store gives one connection;
AWS's S3 guidance is about 100 MB/s per connection, more by parallel ranged GETs) and 1250 MB/s
for all connections together (a 10 Gbit/s network interface). `--link-shared` gives instead one
pipe of MB/s shared by every connection (a home line: parallel requests do not add up).

The anchors on the link are what a user runs: HTTP files are downloaded by one GET stream each
(urllib, as curl or wget do); S3 objects by boto3's `download_file` with its defaults, as
`aws s3 cp` does (objects over 8 MB in 8 MB ranged GETs, 10 at a time: it too gets 10
connections' rate); orbax directories ten objects at a time, as `aws s3 cp --recursive`. Each
download on the link is timed once (the link sets its time). Goals there: inspect >= 50x
faster than download-then-inspect (the loopback rows keep their >= 20x), and the value diff
no slower than downloading one of the two files. Each row on the link notes the link's bound
(`link_bound`): the most any reader could reach with a server that takes no time, from the
anchor's round trips and bytes against the round trips an inspect must wait for.

Inspect rows time the `treetool ls` CLI in a fresh process (its start, ~0.15-0.2 s, included:
the row says "CLI"); the "in-process" row beside it times `treetool.load(url)` and a walk of
its leaves in a fresh process after its imports (what a notebook or script pays).

Inspect rows: requests and bytes of one run; wall times are the best of `REPEAT` fresh runs,
for treetool and for download + local alike. The children run with compiled bytecode cached
(`PYTHONPYCACHEPREFIX` in the run's temporary folder), as an installed treetool does.

    python benchmarks/bench_remote.py [--scale 1.0] [--s3-scale 1.0] [--latency 0.02]
                                      [--link 20,100] [--quick]
                                      [--only s3|http|slow|gcs|orbax|s3-link|http-link]
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "remote"))

import _rows
from storage_servers import BUCKET, GcsServer, HttpServer, Link, S3Server, environment

TREETOOL = [sys.executable, "-m", "treetool.cli"]

# A small launcher measures the child: Linux keeps the peak RSS of a forked process across
# exec, so a child forked from this (big) process would report this process's peak.
_LAUNCHER = """
import os, subprocess, sys, time
t0 = time.perf_counter()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
_, status, usage = os.wait4(p.pid, 0)
wall = time.perf_counter() - t0
err = p.stderr.read().decode()
code = os.waitstatus_to_exitcode(status)
print(wall, usage.ru_maxrss / 1024, code)
if code not in (0, 1):
    print(err, file=sys.stderr)
"""

_DOWNLOAD = """
import os, shutil, sys, urllib.request
dest, urls = sys.argv[1], sys.argv[2:]
if urls[0].startswith("s3://"):
    import boto3
    c = boto3.client("s3")
    for url in urls:
        bucket, key = url[5:].split("/", 1)
        if key.endswith("/"):  # a directory (orbax): every object under it, paths kept
            top = os.path.basename(key.rstrip("/"))
            pages = c.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key)
            jobs = []
            for page in pages:
                for obj in page.get("Contents", []):
                    out = os.path.join(dest, top, obj["Key"][len(key):])
                    os.makedirs(os.path.dirname(out), exist_ok=True)
                    jobs.append((obj["Key"], out))
            # ten at a time, as `aws s3 cp --recursive` does by default
            from concurrent.futures import ThreadPoolExecutor
            with ThreadPoolExecutor(10) as pool:
                list(pool.map(lambda j: c.download_file(bucket, j[0], j[1]), jobs))
        else:
            c.download_file(bucket, key, os.path.join(dest, os.path.basename(key)))
else:
    for url in urls:
        with urllib.request.urlopen(url) as r, open(os.path.join(dest, url.rsplit("/", 1)[1]), "wb") as f:
            shutil.copyfileobj(r, f, 1 << 20)
"""


#: inspect: at least this many times faster than download + local, on the loopback and on
#: the shaped link (`--link`: 20 ms per round trip, 100 MB/s by default)
SPEEDUP_GOAL = 20.0
SPEEDUP_GOAL_LINK = 50.0

#: fresh runs of each timed command (and of each download + local command): the best counts
REPEAT = 3


def run(cmd: list[str], env: dict[str, str], repeat: int = 1) -> tuple[float, float]:
    """Wall time (s) and peak RSS (MB) of a fresh process running `cmd`: the fastest of
    `repeat` runs (and its peak)."""
    best: tuple[float, float] | None = None
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, *cmd], capture_output=True, text=True, env=env
        )
        wall, rss, code = out.stdout.split()
        if int(code) not in (0, 1):
            raise SystemExit(f"command failed ({code}): {' '.join(cmd)}\n{out.stderr}")
        if best is None or float(wall) < best[0]:
            best = (float(wall), float(rss))
    assert best is not None
    return best


def download_then(
    urls: list[str], then: list[str], dest: str, env: dict[str, str], repeat: int = 1
) -> tuple[float, float]:
    """Download `urls` (boto3 for s3://) into `dest`, then run `then`; wall of both, max RSS
    (the fastest of `repeat` tries)."""
    best: tuple[float, float] | None = None
    for _ in range(repeat):
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(dest)
        t1, r1 = run([sys.executable, "-c", _DOWNLOAD, dest, *urls], env)
        t2, r2 = run(then, env)
        if best is None or t1 + t2 < best[0]:
            best = (t1 + t2, max(r1, r2))
            LOCAL[:] = [t2]
    assert best is not None
    return best


#: the local command's time in the best run of the last `download_then`
LOCAL: list[float] = [0.0]


def download_time(base: str, sizes: list[int], batch: int = 1) -> float:
    """Seconds the anchor's download of files of `sizes` takes on the shaped link with a
    server that takes no time (see `link_bound`): each step's round trips and its bytes at
    the link's rate, one after the other.

    Example:
        >>> LINK[:] = [Link(rtt=0.02, rate=100e6)]
        >>> round(download_time("http://h/k", [10**9, 10**9]), 2)  # two streams in turn
        20.04
    """
    link = LINK[0]
    cap = link.total or float("inf")
    t = 0.0
    if base.startswith("s3://"):
        part = 8 << 20
        for k in range(0, len(sizes), batch):
            group = sizes[k : k + batch]
            parts = sum(max(1, -(-n // part)) for n in group)
            conns = min(10, parts)
            rate = link.rate if not link.per_connection else min(conns * link.rate, cap)
            t += link.rtt + -(-parts // conns) * link.rtt + sum(group) / rate
    else:
        t += sum(link.rtt + n / link.rate for n in sizes)
    return t


def link_bound(base: str, sizes: list[int], trips: int, local: float, batch: int = 1) -> str:
    """What the shaped link allows at best, with a server that takes no time: the anchor's
    download of files of `sizes` (S3: boto3's HEAD, then 8 MiB parts 10 at a time, `batch`
    files at once; HTTP: one GET stream each, one file after another) and then `local`
    seconds of the local command, against the `trips` round trips that any remote inspect
    waits for one after the other; the most times faster an inspect can be on this link.
    Generous to the inspect: each download step counts its round trips and its bytes at the
    link's rate one after the other, and the inspect only its round trips.

    Example:
        >>> LINK[:] = [Link(rtt=0.02, rate=100e6, total=1250e6)]
        >>> link_bound("s3://b/k", [2**30], 2, 0.1)
        'link bound: download + local >= 1.45 s, inspect >= 2 round trips (40 ms): at most 36x'
        >>> link_bound("http://h/k", [2**30], 2, 0.1)
        'link bound: download + local >= 10.86 s, inspect >= 2 round trips (40 ms): at most 271x'
    """
    link = LINK[0]
    t_dl = download_time(base, sizes, batch) + local
    t_tt = trips * link.rtt
    return (
        f"link bound: download + local >= {t_dl:.2f} s, inspect >= {trips} round trips "
        f"({t_tt * 1000:.0f} ms): at most {t_dl / t_tt:.0f}x"
    )


def _share(sent: int, total: int) -> str:
    """Bytes read as a share of the total, with both sizes."""
    return f"{sent / total:.3%} ({_size(sent)} of {_size(total)})"


def _size(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"


def write_shards(root: str, total: int, shards: int = 16, per_shard: int = 8) -> list[str]:
    import json

    from safetensors.numpy import save_file

    n = max(1, total // (shards * per_shard * 4))
    names, weight_map = [], {}
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        tensors = {
            f"model.layers.{s * per_shard + i}.mlp.weight": np.full(n, s + i, np.float32)
            for i in range(per_shard)
        }
        save_file(tensors, os.path.join(root, fname))
        weight_map.update(dict.fromkeys(tensors, fname))
        names.append(fname)
    with open(os.path.join(root, "model.safetensors.index.json"), "w") as fh:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, fh)
    return names


def write_pickles(root: str, total: int, arrays: int = 128) -> None:
    n = max(1, total // (arrays * 4))
    tree = {f"layer_{i}": {"w": np.full(n, i, np.float32), "step": i} for i in range(arrays)}
    with open(os.path.join(root, "ckpt_1000.pkl"), "wb") as fh:
        pickle.dump(tree, fh, protocol=4)
    tree[f"layer_{arrays // 2}"]["w"] = tree[f"layer_{arrays // 2}"]["w"] + 1
    with open(os.path.join(root, "ckpt_2000.pkl"), "wb") as fh:
        pickle.dump(tree, fh, protocol=4)


def write_orbax(root: str, arrays: int = 10_000, side: int = 160) -> str:
    """An orbax checkpoint of `arrays` arrays of `side` x `side` float32 (160: 100 KiB each,
    ~1 GB in all, the size of the other rows; random, so zstd cannot shrink it), in layers of
    10, saved by orbax at `root`/orbax_ckpt: a local folder or an `s3://` prefix (orbax's own
    save, with its missing `s3://` branch applied: `tests/remote/_orbax_s3.py`)."""
    import orbax.checkpoint as ocp

    rng = np.random.default_rng(0)
    tree: dict[str, dict[str, np.ndarray]] = {}
    for i in range(arrays):
        tree.setdefault(f"layer_{i // 10}", {})[f"p{i % 10}"] = rng.standard_normal(
            (side, side), dtype=np.float32
        )
    if root.startswith("s3://"):
        from _orbax_s3 import orbax_s3_writes
        from etils import epath

        out = f"{root}/orbax_ckpt"
        with orbax_s3_writes(), ocp.StandardCheckpointer() as ckptr:
            ckptr.save(epath.Path(out), tree)
        return out
    out = os.path.join(root, "orbax_ckpt")
    with ocp.StandardCheckpointer() as ckptr:
        ckptr.save(out, tree)
    return out


_METADATA_CALL = """
import sys, time
url, how = sys.argv[1], sys.argv[2]
if how == "treetool":
    import treetool.io
    t0 = time.perf_counter()
    n = len(list(__import__("treetool").leaves_with_path(treetool.io.read(url).tree)))
else:
    import orbax.checkpoint as ocp
    from etils import epath
    t0 = time.perf_counter()
    meta = ocp.StandardCheckpointer().metadata(epath.Path(url))
    import jax
    tree = meta.item_metadata
    tree = getattr(tree, "tree", tree)
    n = 0 if tree is None else len(
        jax.tree_util.tree_leaves(tree, is_leaf=lambda x: hasattr(x, "shape"))
    )
print(time.perf_counter() - t0, n)
"""


_LOAD_CALL = """
import sys, time
import treetool
url = sys.argv[1]
t0 = time.perf_counter()
n = len(list(treetool.leaves_with_path(treetool.load(url))))
print(time.perf_counter() - t0, n)
"""


def load_in_process(url: str, env: dict[str, str], repeat: int = REPEAT) -> float:
    """Seconds of `treetool.load(url)` and a walk of its leaves, in a fresh process after
    `import treetool` (the best of `repeat` processes)."""
    best = float("inf")
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", _LOAD_CALL, url], capture_output=True, text=True, env=env
        )
        if out.returncode != 0:
            raise SystemExit(f"treetool.load({url}) failed:\n{out.stderr[-2000:]}")
        best = min(best, float(out.stdout.split()[0]))
    return best


def _inspect_rows(
    work: str,
    anchor: str,
    t_dl: float,
    t_cli: float,
    url: str,
    env: dict[str, str],
    goal: Any,
    note: str,
) -> None:
    """The rows of one inspect: the CLI in a fresh process, and `treetool.load` in-process."""
    _rows.row(
        f"{work} (CLI `treetool ls`, process start included)", anchor, t_dl, t_cli, goal, note=note
    )
    t_load = load_in_process(url, env)
    _rows.row(f"{work} (in-process `treetool.load`)", anchor, t_dl, t_load, goal, note=note)


def _orbax_rows(
    label: str,
    url: str,
    log: Any,
    sizes: dict[str, int],
    dl: str,
    env: dict[str, str],
    shaped: bool = False,
) -> list[tuple[str, ...]]:
    """inspect of an orbax checkpoint (`sizes`: its files' sizes by relative path), and its
    metadata read by treetool and by orbax."""
    total = sum(sizes.values())
    rows = []
    log.clear()
    run([*TREETOOL, "ls", url], env)
    reqs, sent = log.count, log.bytes_sent  # one run's requests
    t_tt, _ = run([*TREETOOL, "ls", url], env, REPEAT)
    t_dl, _ = download_then(
        [url + "/"],
        [*TREETOOL, "ls", os.path.join(dl, os.path.basename(url))],
        dl,
        env,
        1 if shaped else REPEAT,
    )
    meta = sizes["_METADATA"]
    rows.append(
        (
            label,
            f"inspect orbax checkpoint (10,000 arrays, {_size(total)}; _METADATA {_size(meta)})",
            str(reqs),
            _share(sent, total),
            f"{t_tt:.2f} s",
            f"{t_dl:.2f} s",
            f"{t_dl / t_tt:.1f}x faster",
        )
    )
    bound = ""
    if shaped:  # a folder: its listing, then its metadata
        bound = "; " + link_bound(url + "/", sorted(sizes.values()), 2, LOCAL[0], batch=10)
    _inspect_rows(
        f"remote inspect, {label}: orbax checkpoint (10,000 arrays, {_size(total)})",
        "download (10 at a time) then inspect",
        t_dl,
        t_tt,
        url,
        env,
        ("speedup>=", SPEEDUP_GOAL_LINK if shaped else SPEEDUP_GOAL),
        f"{reqs} requests, {_share(sent, total)} read{bound}",
    )
    return rows + _metadata_rows(label, url, log, env)


def _metadata_rows(label: str, url: str, log: Any, env: dict[str, str]) -> list[tuple[str, ...]]:
    """The orbax checkpoint's metadata read by `treetool.io.read` and by orbax's
    `StandardCheckpointer().metadata()` on the same URL, each in a fresh process."""
    figures = {}
    for how in ("treetool", "orbax"):
        log.clear()
        out = subprocess.run(
            [sys.executable, "-c", _METADATA_CALL, url, how],
            capture_output=True,
            text=True,
            env=env,
        )
        if out.returncode != 0:
            raise SystemExit(f"{how} metadata failed:\n{out.stderr[-2000:]}")
        secs, leaves = out.stdout.split()
        figures[how] = (float(secs), int(leaves), log.count, log.bytes_sent)
    (t1, n1, r1, b1), (t2, n2, r2, b2) = figures["treetool"], figures["orbax"]
    _rows.row(
        f"orbax metadata, {label}: treetool.io.read",
        "StandardCheckpointer().metadata()",
        t2,
        t1,
        note=f"requests {r1} vs {r2}, {b1 / 2**10:.0f} KiB vs {b2 / 2**10:.0f} KiB",
    )
    return [
        (
            label,
            f"orbax metadata, same path: treetool `io.read` ({n1} leaves) vs "
            "`StandardCheckpointer().metadata()` "
            + (f"({n2} leaves)" if n2 else "(no tree: its `item_metadata` is None)"),
            f"{r1} vs {r2}",
            f"{b1 / 2**10:.0f} KiB vs {b2 / 2**10:.0f} KiB",
            f"{t1:.2f} s",
            f"{t2:.2f} s (orbax)",
            f"{t2 / t1:.1f}x faster",
        )
    ]


def _tasks(
    label: str,
    base: str,
    log: Any,
    size: dict[str, int],
    shard_names: list[str],
    dl: str,
    env: dict[str, str],
    shaped: bool = False,
) -> list[tuple[str, ...]]:
    """The inspect and diff rows of one store; `shaped`: behind a shaped link (downloads are
    timed once there: the link, not the machine, sets their time)."""
    rows = []
    goal: Any = ("speedup>=", SPEEDUP_GOAL_LINK if shaped else SPEEDUP_GOAL)
    if not FULL_SIZE[-1]:  # `--quick`'s small files: the goals are for 1 GB ones
        goal = _rows.not_here(goal, "1 GB files")
    diff_goal: Any = (
        ("ratio<=", 1.0) if FULL_SIZE[-1] else _rows.not_here(("ratio<=", 1.0), "1 GB files")
    )
    dl_repeat, diff_runs = (1, 1) if shaped else (REPEAT, _DIFF_RUNS)
    # 1. inspect a sharded set
    index = "model.safetensors.index.json"
    log.clear()
    run([*TREETOOL, "ls", f"{base}/{index}"], env)
    reqs, sent = log.count, log.bytes_sent  # one run's requests
    t_tt, _ = run([*TREETOOL, "ls", f"{base}/{index}"], env, REPEAT)
    set_bytes = sum(size[n] for n in shard_names) + size[index]
    urls = [f"{base}/{n}" for n in [index, *shard_names]]
    t_dl, _ = download_then(urls, [*TREETOOL, "ls", os.path.join(dl, index)], dl, env, dl_repeat)
    rows.append(
        (
            label,
            f"inspect 16-shard safetensors ({set_bytes / 2**30:.2f} GB)",
            f"{reqs} ({reqs / len(shard_names):.2f}/shard)",
            _share(sent, set_bytes),
            f"{t_tt:.2f} s",
            f"{t_dl:.2f} s",
            f"{t_dl / t_tt:.1f}x faster",
        )
    )
    bound = ""
    if shaped:  # the index, then the shards' headers
        bound = "; " + link_bound(base, [size[n] for n in [index, *shard_names]], 2, LOCAL[0])
    _inspect_rows(
        f"remote inspect, {label}: 16-shard safetensors ({set_bytes / 2**30:.2f} GB)",
        _how_downloaded(base) + " then inspect",
        t_dl,
        t_tt,
        f"{base}/{index}",
        env,
        goal,
        f"{reqs} requests, {_share(sent, set_bytes)} read{bound}",
    )
    # 2. inspect a pickle
    pkl = "ckpt_1000.pkl"
    log.clear()
    run([*TREETOOL, "ls", f"{base}/{pkl}"], env)
    reqs, sent = log.count, log.bytes_sent  # one run's requests
    t_tt, _ = run([*TREETOOL, "ls", f"{base}/{pkl}"], env, REPEAT)
    t_dl, _ = download_then(
        [f"{base}/{pkl}"], [*TREETOOL, "ls", os.path.join(dl, pkl)], dl, env, dl_repeat
    )
    rows.append(
        (
            label,
            f"inspect pickle ({size[pkl] / 2**30:.2f} GB, 128 arrays)",
            str(reqs),
            _share(sent, size[pkl]),
            f"{t_tt:.2f} s",
            f"{t_dl:.2f} s",
            f"{t_dl / t_tt:.1f}x faster",
        )
    )
    bound = ""
    if shaped:  # the first block, then the landings after its first payload (all guessed)
        bound = "; " + link_bound(base, [size[pkl]], 2, LOCAL[0])
    _inspect_rows(
        f"remote inspect, {label}: pickle ({size[pkl] / 2**30:.2f} GB, 128 arrays)",
        _how_downloaded(base) + " then inspect",
        t_dl,
        t_tt,
        f"{base}/{pkl}",
        env,
        goal,
        f"{reqs} requests, {_share(sent, size[pkl])} read{bound}",
    )
    # 3. value diff of two checkpoints differing in one leaf: best of 3 each way (wall time on
    # a shared machine is noisy), with the CPU time of the client processes next to it
    a, b = "ckpt_1000.pkl", "ckpt_2000.pkl"
    data = size[a] + size[b]
    tt_runs, dl_runs = [], []
    for _ in range(diff_runs):
        log.clear()
        cpu0 = _children_cpu()
        t_tt, rss_tt = run([*TREETOOL, "diff", f"{base}/{a}", f"{base}/{b}"], env)
        tt_runs.append((t_tt, _children_cpu() - cpu0, rss_tt, log.count, log.bytes_sent))
        cpu0 = _children_cpu()
        t_dl, rss_dl = download_then(
            [f"{base}/{a}", f"{base}/{b}"],
            [*TREETOOL, "diff", os.path.join(dl, a), os.path.join(dl, b)],
            dl,
            env,
        )
        dl_runs.append((t_dl, _children_cpu() - cpu0, rss_dl))
    t_tt, cpu_tt, rss_tt, reqs, sent = min(tt_runs)
    t_dl, cpu_dl, rss_dl = min(dl_runs)
    rows.append(
        (
            label,
            f"value diff of 2 pickles ({data / 2**30:.2f} GB), best of {diff_runs}",
            str(reqs),
            f"{sent / data:.1%}",
            f"{t_tt:.2f} s (cpu {cpu_tt:.2f} s), peak {rss_tt:.0f} MB "
            f"({rss_tt * 2**20 / data:.1%} of data)",
            f"{t_dl:.2f} s (cpu {cpu_dl:.2f} s), peak {rss_dl:.0f} MB",
            f"{t_tt / t_dl:.2f}x the time, {cpu_tt / cpu_dl:.2f}x the cpu",
        )
    )
    _rows.row(
        f"remote value diff, {label}: 2 pickles ({data / 2**30:.2f} GB)",
        _how_downloaded(base) + ": both, then diff",
        t_dl,
        t_tt,
        diff_goal,
        peak_mb=rss_tt,
        note=f"{reqs} requests, {sent / data:.1%} read; cpu {cpu_tt / cpu_dl:.2f}x",
    )
    if shaped:  # the goal on a real link: no slower than downloading one of the two
        t_one, _ = run([sys.executable, "-c", _DOWNLOAD, _fresh(dl), f"{base}/{a}"], env)
        link = LINK[0]
        cap = link.total or float("inf")
        if not link.per_connection:
            cap = link.rate
        # any reader of both files' bytes, on every connection it likes, against the one
        # download at its best (its round trips and bytes one after the other: generous)
        least = data / cap
        one = download_time(base, [size[a]])
        _rows.row(
            f"remote value diff, {label}: 2 pickles ({data / 2**30:.2f} GB)",
            _how_downloaded(base) + f": one of them ({size[a] / 2**30:.2f} GB)",
            t_one,
            t_tt,
            diff_goal,
            peak_mb=rss_tt,
            note=f"{sent / data:.1%} of both files read ({reqs} requests); link {link}; "
            f"link bound: reading both >= {least:.2f} s ({data / 1e9:.2f} GB at "
            f"{cap / 1e6:.0f} MB/s), downloading one <= {one:.2f} s: at least {least / one:.2f}x",
        )
    return rows


#: whether the store's files are the size the goals were set for (1 GB), the last store's last
FULL_SIZE: list[bool] = [True]

#: the shaped link in use, for the notes
LINK: list[Any] = []


def _how_downloaded(base: str) -> str:
    """The anchor's download, as the row names it."""
    if base.startswith("s3://"):
        return "download (boto3 download_file: 8 MB parts, 10 at a time, as aws s3 cp)"
    return "download (one GET stream each, as curl)"


def _fresh(d: str) -> str:
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


#: runs of each side of the value diff row (the best is shown)
_DIFF_RUNS = 3


def _children_cpu() -> float:
    """CPU seconds (user + system) of the waited-for child processes so far: a launcher and
    the command it waited for."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _store_s3(
    total: int, tmp: str, env: dict[str, str], big: bool = True, link: Any = None
) -> list[tuple[str, ...]]:
    src = os.path.join(tmp, "s3src")
    os.makedirs(src)
    shard_names = write_shards(src, total) if big else []
    if big:
        write_pickles(src, total)
    server = S3Server(fast_ranges=True)
    # moto's store is one per process: the loopback and the link runs write under their own
    # prefixes (orbax refuses to save over a checkpoint)
    prefix = "a" if link is None else "link"
    try:
        client = server.client()
        client.create_bucket(Bucket=BUCKET)
        for name in sorted(os.listdir(src)):
            client.upload_file(os.path.join(src, name), BUCKET, f"{prefix}/{name}")
        env = {
            **env,
            "AWS_ENDPOINT_URL": server.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        url = _write_orbax_s3(f"s3://{BUCKET}/{prefix}", env)
        size = {n: os.path.getsize(os.path.join(src, n)) for n in os.listdir(src)}
        dl = os.path.join(tmp, "dl")
        rows = []
        label = "s3 (moto, loopback)" if link is None else f"s3 (moto), link {link}"
        server.link = link  # from here on: the uploads above were not shaped
        shaped = link is not None
        if big:
            base = f"s3://{BUCKET}/{prefix}"
            rows = _tasks(label, base, server.log, size, shard_names, dl, env, shaped)
        sizes = _listed_sizes(client, f"{prefix}/orbax_ckpt/")
        return rows + _orbax_rows(label, url, server.log, sizes, dl, env, shaped)
    finally:
        server.stop()
        shutil.rmtree(src, ignore_errors=True)


def _write_orbax_s3(root: str, env: dict[str, str]) -> str:
    """`write_orbax` straight to the S3 server, with the `AWS_*` settings of `env` (the
    server's) set in this process while it runs."""
    import s3fs
    from etils.epath import backend

    # fsspec and etils keep the S3 filesystem made for an earlier server (its endpoint)
    s3fs.S3FileSystem.clear_instance_cache()
    backend._FileSystemSpecBackend._get_filesystem.cache_clear()
    with environment({k: v for k, v in env.items() if k.startswith("AWS_")}):
        return write_orbax(root)


def _listed_sizes(client: Any, prefix: str) -> dict[str, int]:
    """The size of each object under `prefix`, by its key relative to it."""
    sizes = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        for obj in page.get("Contents", []):
            sizes[obj["Key"][len(prefix) :]] = obj["Size"]
    return sizes


def _store_gcs(total: int, tmp: str, env: dict[str, str]) -> list[tuple[str, ...]]:
    """The orbax metadata comparison on the GCS emulator, where orbax reads its tree."""
    orbax_src = os.path.join(tmp, "orbaxgcs")
    os.makedirs(orbax_src)
    orbax_dir = write_orbax(orbax_src, side=64)  # metadata only: small arrays upload faster
    server = GcsServer()
    try:
        server.create_bucket(BUCKET)
        for dirpath, _, names in os.walk(orbax_dir):
            for name in names:
                full = os.path.join(dirpath, name)
                with open(full, "rb") as fh:
                    key = "a/orbax_ckpt/" + os.path.relpath(full, orbax_dir)
                    server.upload(BUCKET, key, fh.read())
        env = {
            **env,
            "STORAGE_EMULATOR_HOST": server.host,
            "TENSORSTORE_GCS_HTTP_URL": server.host,
            # orbax's gcsfs would first ask the bucket's layout over gRPC (60 s to give up)
            "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
        }
        url = f"gs://{BUCKET}/a/orbax_ckpt"
        return _metadata_rows("gcs (emulator)", url, server.log, env)
    finally:
        server.stop()
        shutil.rmtree(orbax_src, ignore_errors=True)


def _store_http(
    total: int, tmp: str, env: dict[str, str], latency: float = 0.0, link: Any = None
) -> list[tuple[str, ...]]:
    src = os.path.join(tmp, "httpsrc")
    os.makedirs(src)
    shard_names = write_shards(src, total)
    write_pickles(src, total)
    server = HttpServer(src, latency=latency, link=link)
    label = f"http, {latency * 1000:.0f} ms per request" if latency else "http (ranged, loopback)"
    if link is not None:
        label = f"http, link {link}"
    try:
        size = {n: os.path.getsize(os.path.join(src, n)) for n in os.listdir(src)}
        dl = os.path.join(tmp, "dl")
        return _tasks(label, server.url, server.log, size, shard_names, dl, env, link is not None)
    finally:
        server.stop()
        shutil.rmtree(src, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="HTTP files: 1.0 is ~1 GB each")
    ap.add_argument("--s3-scale", type=float, default=1.0, help="S3 (moto) files")
    ap.add_argument(
        "--latency", type=float, default=0.02, help="seconds per request of the slow HTTP rows"
    )
    ap.add_argument(
        "--only",
        choices=("s3", "http", "slow", "gcs", "orbax", "s3-link", "http-link"),
        help="one store only (orbax: the orbax rows on S3 and GCS, no 1 GB files)",
    )
    ap.add_argument(
        "--link",
        default="20,100,1250",
        help="the shaped link of the s3-link and http-link rows: MS per round trip,MB/s per "
        "connection[,MB/s of all connections together]",
    )
    ap.add_argument(
        "--link-shared",
        action="store_true",
        help="one pipe of MB/s shared by every connection (a home line), not per connection",
    )
    ap.add_argument("--quick", action="store_true", help="--scale 0.05 --s3-scale 0.05")
    _rows.add_argument(ap)
    args = ap.parse_args()
    if args.quick:
        args.scale = args.s3_scale = 0.05
    ms, mbps, *cap = (float(x) for x in args.link.split(","))
    link = Link(
        rtt=ms / 1000,
        rate=mbps * 1e6,
        total=cap[0] * 1e6 if cap and not args.link_shared else None,
        per_connection=not args.link_shared,
    )
    LINK.append(link)
    tmp = tempfile.mkdtemp(prefix="bench_remote_")
    env = dict(os.environ)
    # the children run as an installed treetool does: with its compiled bytecode (pip
    # compiles at install), not compiling every module from source in each fresh process
    # (what PYTHONDONTWRITEBYTECODE=1 would make them do: ~0.1 s each, remote or local)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
    rows: list[tuple[str, ...]] = []
    stores: list[tuple[str, Any, float, dict[str, Any]]] = [
        ("s3", _store_s3, args.s3_scale, {}),
        ("gcs", _store_gcs, 0.0, {}),
        ("http", _store_http, args.scale, {}),
        ("slow", _store_http, args.scale, {"latency": args.latency}),
        ("s3-link", _store_s3, args.s3_scale, {"link": link}),
        ("http-link", _store_http, args.scale, {"link": link}),
    ]
    try:
        for name, store, scale, extra in stores:
            if args.only == "orbax" and name in ("s3", "gcs"):
                extra = {"big": False} if name == "s3" else extra
            elif args.only and name != args.only:
                continue
            total = int((1 << 30) * scale)
            FULL_SIZE.append(name == "gcs" or scale >= 0.9)
            print(f"{name}: files of {total / 2**30:.2f} GB ...", file=sys.stderr)
            rows.extend(store(total, tmp, dict(env), **extra))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    head = (
        "store",
        "task",
        "requests",
        "bytes read",
        "treetool, remote",
        "download + local",
        "ratio",
    )
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    _rows.dump(args.rows_json)


if __name__ == "__main__":
    main()
