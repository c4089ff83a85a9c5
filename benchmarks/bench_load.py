"""`treetool inspect --json FILE` (safe, lazy) vs the plain loaders, as whole commands.

One run writes its files under /tmp (deleted at the end), times each command as a fresh
process (best of 3 wall times) with its peak RSS (from wait4), and prints one table:

- a ~2 GB pickle of a few large arrays: `python -c "pickle.load(...)"` vs treetool
  (targets: < 0.3 s and < 80 MB for treetool, whatever the file's size);
- a pickle of 100,000 small arrays: same commands (target: within 3x);
- an orbax checkpoint of 100,000 small arrays: `StandardCheckpointer().metadata()` (only timed
  up to 10,000 arrays: it takes minutes beyond) vs treetool (target: < 2 s);
- small safetensors / npz / jax-params pickle files (target: < 0.5 s each).

    python benchmarks/bench_load.py [--quick] [--orbax N]
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time

import _rows
import numpy as np

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
if code:
    print(err, file=sys.stderr)
"""


def run(cmd: list[str], repeat: int = 3) -> tuple[float, float]:
    """Best wall time (s) of a fresh process running `cmd`, and its peak RSS (MB)."""
    best = (float("inf"), 0.0)
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, *cmd], capture_output=True, text=True
        )
        wall, rss, code = out.stdout.split()
        if int(code) != 0:
            raise SystemExit(f"command failed ({code}): {' '.join(cmd)}\n{out.stderr}")
        if float(wall) < best[0]:
            best = (float(wall), float(rss))
    return best


def paired(cmd_a: list[str], cmd_b: list[str], repeat: int = 5) -> tuple[tuple, tuple]:
    """`run` of two commands taken in turns, so that a noisy moment hits both alike."""
    a, b = (float("inf"), 0.0), (float("inf"), 0.0)
    for _ in range(repeat):
        a = min(a, run(cmd_a, repeat=1))
        b = min(b, run(cmd_b, repeat=1))
    return a, b


def pickle_load_cmd(path: str) -> list[str]:
    return [sys.executable, "-c", f"import pickle; pickle.load(open({path!r}, 'rb'))"]


def inspect_cmd(path: str) -> list[str]:
    return [*TREETOOL, "inspect", "--json", path]


def load_cmd(path: str) -> list[str]:
    code = f"import treetool.io as io; io.read({path!r})"
    return [sys.executable, "-c", code]


def write_big(path: str, total_bytes: int) -> None:
    n = 4
    each = total_bytes // n // 4
    tree = {f"layer{i}": {"kernel": np.zeros(each, np.float32)} for i in range(n)}
    with open(path, "wb") as fh:
        pickle.dump(tree, fh, protocol=4)


def write_many(path: str, n: int) -> None:
    tree = {f"layer{i}": {"w": np.zeros((4,), np.float32), "b": np.ones(2)} for i in range(n // 2)}
    with open(path, "wb") as fh:
        pickle.dump(tree, fh, protocol=4)


def write_orbax(path: str, n: int) -> float:
    import orbax.checkpoint as ocp

    tree = {f"p{i}": np.full((4,), i, np.float32) for i in range(n)}
    t = time.perf_counter()
    ck = ocp.StandardCheckpointer()
    ck.save(path, tree)
    ck.wait_until_finished()
    return time.perf_counter() - t


def orbax_metadata_cmd(path: str) -> list[str]:
    code = f"import orbax.checkpoint as ocp; ocp.StandardCheckpointer().metadata({path!r})"
    return [sys.executable, "-W", "ignore", "-c", code]


def write_small(d: str) -> dict[str, str]:
    import jax.numpy as jnp
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    arrays = {
        f"layer{i}.{k}": rng.standard_normal((64, 64)).astype(np.float32)
        for i in range(8)
        for k in ("w", "b")
    }
    out = {
        "small.safetensors": os.path.join(d, "small.safetensors"),
        "small.npz": os.path.join(d, "small.npz"),
    }
    save_file(arrays, out["small.safetensors"])
    np.savez(out["small.npz"], **arrays)
    params = {
        "params": {
            f"Dense_{i}": {"kernel": jnp.ones((64, 64)), "bias": jnp.zeros(64)} for i in range(8)
        }
    }
    out["small_jax_params.pkl"] = os.path.join(d, "small_jax_params.pkl")
    with open(out["small_jax_params.pkl"], "wb") as fh:
        pickle.dump(params, fh)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="200 MB, 10,000 arrays")
    ap.add_argument("--orbax", type=int, default=None, help="arrays in the orbax checkpoint")
    _rows.add_argument(ap)
    args = ap.parse_args()
    big_bytes = (200 if args.quick else 2000) * 2**20
    many = 10_000 if args.quick else 100_000
    n_orbax = args.orbax if args.orbax is not None else (10_000 if args.quick else 100_000)

    d = tempfile.mkdtemp(prefix="treetool_bench_", dir="/tmp")
    rows: list[tuple[str, str, float, float, float, float, str]] = []
    try:
        big = os.path.join(d, "big.pkl")
        write_big(big, big_bytes)
        a_t, a_m = run(pickle_load_cmd(big), repeat=1)
        o_t, o_m = run(inspect_cmd(big))
        rows.append(
            (
                f"pickle {os.path.getsize(big) / 2**30:.1f} GB, 4 arrays",
                "pickle.load",
                a_t,
                a_m,
                o_t,
                o_m,
                "< 0.3 s, < 80 MB",
            )
        )

        small_many = os.path.join(d, "many.pkl")
        write_many(small_many, many)
        (a_t, a_m), (o_t, o_m) = paired(pickle_load_cmd(small_many), inspect_cmd(small_many))
        rows.append((f"pickle, {many:,} arrays", "pickle.load", a_t, a_m, o_t, o_m, "<= 3x"))
        o_t, o_m = run(load_cmd(small_many))
        rows.append(("  same, treetool.io.read only", "pickle.load", a_t, a_m, o_t, o_m, "<= 3x"))

        ck = os.path.join(d, "orbax")
        save_s = write_orbax(ck, n_orbax)
        if n_orbax <= 10_000:
            a_t, a_m = run(orbax_metadata_cmd(ck), repeat=1)
        else:
            a_t, a_m = float("nan"), float("nan")
        o_t, o_m = run(inspect_cmd(ck))
        rows.append(
            (
                f"orbax, {n_orbax:,} arrays (save {save_s:.0f} s)",
                "ocp metadata()",
                a_t,
                a_m,
                o_t,
                o_m,
                "< 2 s",
            )
        )

        floor_t, floor_m = run([sys.executable, "-c", "import numpy"])
        for name, path in write_small(d).items():
            o_t, o_m = run(inspect_cmd(path))
            rows.append((name, "python -c 'import numpy'", floor_t, floor_m, o_t, o_m, "< 0.5 s"))
    finally:
        shutil.rmtree(d, ignore_errors=True)

    head = f"{'case':<38} {'anchor':<26} {'anchor s':>9} {'MB':>6} {'treetool s':>10} {'MB':>6} {'ratio':>6}  target"
    print(head)
    print("-" * len(head))
    for case, anchor, a_t, a_m, o_t, o_m, target in rows:
        ratio = o_t / a_t if a_t == a_t and a_t > 0 else float("nan")
        print(
            f"{case:<38} {anchor:<26} {a_t:>9.3f} {a_m:>6.0f} {o_t:>10.3f} {o_m:>6.0f} {ratio:>6.2f}  {target}"
        )
        _rows.row(
            f"treetool inspect --json: {case.strip()}",
            anchor,
            a_t if a_t == a_t else None,
            o_t,
            _goal(target),
            peak_mb=o_m,
            note=f"anchor peak {a_m:.0f} MB; target {target}" if a_m == a_m else f"target {target}",
        )
    _rows.dump(args.rows_json)


def _goal(target: str) -> tuple[str, float]:
    """The table's goal of a target text: `<= 3x` or `< 0.3 s` (its first clause)."""
    first = target.split(",")[0].strip()
    if first.endswith("x"):
        return ("ratio<=", float(first.removeprefix("<=").removesuffix("x")))
    return ("s<", float(first.removeprefix("<").removesuffix("s")))


if __name__ == "__main__":
    main()
