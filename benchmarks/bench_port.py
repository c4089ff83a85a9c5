"""Benchmark of `tt.port` on a 7B-parameter Llama-shaped model: planning, then streaming apply.

Source: a sharded safetensors set with Hugging Face Llama names (`model.layers.{i}.self_attn.
q_proj.weight`, ..., `lm_head.weight`), 32 blocks, hidden 4096, MLP 11008, vocabulary 32000,
bfloat16, in 2 shards plus `model.safetensors.index.json`. Header only: the shards are sparse
files of the right size (no values are written; the disk holds only the headers).
Target: a flax-style tree of `jax.ShapeDtypeStruct`s (`params/model/layers_{i}/self_attn/
q_proj/kernel`, `(in, out)` kernels), nothing allocated.

Figures, each beside its anchor in the same run:
- planning: `tt.port(index, target)` (reading the index and both headers, normalising 291
  names on each side, matching, choosing layouts) against the 1 s target, and against
  `tt.load(index)` alone (what reading the headers costs);
- applying: every target leaf read, transformed (the 2-D weights transposed) and written to
  /dev/null by the streaming safetensors writer, shard by shard in file order; peak memory
  (tracemalloc, which sees numpy's buffers) against the largest tensor (the 2x target).

    python benchmarks/bench_port.py           # 7B shapes
    python benchmarks/bench_port.py --quick   # 8 blocks, hidden 1024 (a quick check)
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import tempfile
import time
import tracemalloc

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import numpy as np

import treetool as tt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _rows


def llama_shapes(blocks: int, hidden: int, mlp: int, vocab: int) -> dict[str, tuple[int, ...]]:
    """Hugging Face Llama names and torch `(out, in)` shapes."""
    out = {"model.embed_tokens.weight": (vocab, hidden)}
    for i in range(blocks):
        p = f"model.layers.{i}."
        for n in ("q", "k", "v", "o"):
            out[f"{p}self_attn.{n}_proj.weight"] = (hidden, hidden)
        out[f"{p}mlp.gate_proj.weight"] = (mlp, hidden)
        out[f"{p}mlp.up_proj.weight"] = (mlp, hidden)
        out[f"{p}mlp.down_proj.weight"] = (hidden, mlp)
        out[f"{p}input_layernorm.weight"] = (hidden,)
        out[f"{p}post_attention_layernorm.weight"] = (hidden,)
    out["model.norm.weight"] = (hidden,)
    out["lm_head.weight"] = (vocab, hidden)
    return out


def write_header_only_shards(d: str, shapes: dict[str, tuple[int, ...]], n_shards: int) -> str:
    """Sparse safetensors shards (header, then a hole of the data's size) and their index."""
    names = list(shapes)
    per = -(-len(names) // n_shards)
    weight_map = {}
    for s in range(n_shards):
        fname = f"model-{s + 1:05d}-of-{n_shards:05d}.safetensors"
        header, offset = {}, 0
        for name in names[s * per : (s + 1) * per]:
            nbytes = int(np.prod(shapes[name])) * 2
            header[name] = {
                "dtype": "BF16",
                "shape": list(shapes[name]),
                "data_offsets": [offset, offset + nbytes],
            }
            offset += nbytes
            weight_map[name] = fname
        header["__metadata__"] = {"format": "pt"}
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        with open(os.path.join(d, fname), "wb") as fh:
            fh.write(struct.pack("<Q", len(text)) + text)
            fh.truncate(8 + len(text) + offset)  # a hole: no data blocks on disk
    index = os.path.join(d, "model.safetensors.index.json")
    with open(index, "w") as fh:
        json.dump({"metadata": {}, "weight_map": weight_map}, fh)
    return index


def flax_target(blocks: int, hidden: int, mlp: int, vocab: int) -> dict:
    """The flax-style model as `jax.ShapeDtypeStruct`s: `(in, out)` kernels, `scale`s."""
    bf16 = jax.numpy.bfloat16

    def sds(*shape: int) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(shape, bf16)

    model: dict = {"embed_tokens": {"embedding": sds(vocab, hidden)}}
    for i in range(blocks):
        model[f"layers_{i}"] = {
            "self_attn": {f"{n}_proj": {"kernel": sds(hidden, hidden)} for n in "qkvo"},
            "mlp": {
                "gate_proj": {"kernel": sds(hidden, mlp)},
                "up_proj": {"kernel": sds(hidden, mlp)},
                "down_proj": {"kernel": sds(mlp, hidden)},
            },
            "input_layernorm": {"scale": sds(hidden)},
            "post_attention_layernorm": {"scale": sds(hidden)},
        }
    model["norm"] = {"scale": sds(hidden)}
    return {"params": {"model": model, "lm_head": {"kernel": sds(hidden, vocab)}}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-apply", action="store_true", help="planning only")
    _rows.add_argument(ap)
    args = ap.parse_args()
    cfg = (8, 1024, 2816, 32000) if args.quick else (32, 4096, 11008, 32000)
    shapes = llama_shapes(*cfg)
    params = sum(int(np.prod(s)) for s in shapes.values())
    largest = max(int(np.prod(s)) * 2 for s in shapes.values())
    print(f"model: {cfg[0]} blocks, hidden {cfg[1]}, {params / 1e9:.2f}e9 params, "
          f"{len(shapes)} tensors, {params * 2 / 2**30:.1f} GiB bf16, largest tensor "
          f"{largest / 2**20:.0f} MiB")  # fmt: skip
    with tempfile.TemporaryDirectory() as d:
        index = write_header_only_shards(d, shapes, 2)
        target = flax_target(*cfg)
        tt.port({"a.weight": np.zeros((2, 3), np.float32)}, {"a": {"kernel": np.zeros((3, 2))}})

        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            plan = tt.port(index, target)
            times.append(time.perf_counter() - t0)
        loads = []
        for _ in range(3):
            t0 = time.perf_counter()
            tt.load(index)
            loads.append(time.perf_counter() - t0)
        t_load = min(loads)
        t_plan = min(times)
        assert plan.complete, plan.problems()[:5]
        transposed = sum(1 for r in plan.rows if r.steps == ("T",))
        print(f"plan: {len(plan.rows)} rows ({transposed} transposed), complete={plan.complete}")
        print(f"  tt.load(index) alone        {t_load * 1e3:8.1f} ms   (best of 3, after the port)")
        print(
            f"  tt.port(index, target)      {times[0] * 1e3:8.1f} ms first (headers not yet read)"
        )
        print(f"  tt.port(index, target)      {t_plan * 1e3:8.1f} ms   (best of 3; "
              f"{t_plan / t_load:.1f}x the load; {t_plan / 1.0:.2f}x the 1 s target; first run "
              f"{times[0] / 1.0:.2f}x)")  # fmt: skip
        name = f"{cfg[0]} blocks, hidden {cfg[1]}, {len(shapes)} tensors"
        _rows.row(f"tt.port(index, target): plan, {name}", "tt.load(index) alone", t_load, t_plan,
                  ("s<", 1.0), note=f"first run {times[0] * 1e3:.0f} ms")  # fmt: skip
        if args.no_apply:
            _rows.dump(args.rows_json)
            return
        from treetool._port._write import write_values

        first = {r.target: plan._source.arrays[r.sources[0]] for r in plan.rows}
        order = sorted(first, key=lambda t: (first[t].file, first[t].offset))
        tracemalloc.start()
        t0 = time.perf_counter()
        with open(os.devnull, "wb") as fh:
            write_values(plan, fh, order, cast=False)
        t_apply = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"apply (stream to /dev/null, shard by shard): {params * 2 / 2**30:.1f} GiB in "
              f"{t_apply:.1f} s ({params * 2 / 2**30 / t_apply:.2f} GiB/s)")  # fmt: skip
        print(f"  peak traced memory {peak / 2**20:8.0f} MiB = {peak / largest:.2f}x the largest "
              f"tensor ({largest / 2**20:.0f} MiB); target < 2x")  # fmt: skip
        gib = params * 2 / 2**30
        _rows.row(f"tt.port apply, streamed to /dev/null: {name}, {gib:.1f} GiB", None, None,
                  t_apply, ("mb<", 2 * largest / 2**20), peak_mb=peak / 2**20,
                  note=f"{gib / t_apply:.2f} GiB/s; peak traced memory {peak / largest:.2f}x "
                  f"the largest tensor; goal < 2x")  # fmt: skip
    _rows.dump(args.rows_json)


if __name__ == "__main__":
    main()
