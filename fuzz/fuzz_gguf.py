"""Coverage-guided fuzzing of the GGUF reader: `harness.py`'s target with a `gguf` entry.

Each input is written as `input.gguf` and goes through everything `harness.py FORMAT` does
(`treetool.io.read`, then every view and `get` on the first leaves): only `LoadError` may come
out of reading, nothing out of rendering. Seeds: `fuzz/corpus/gguf/`, files written by gguf-py's
`GGUFWriter` (`python fuzz/fuzz_gguf.py --make-corpus` rewrites them).

Usage:

    python fuzz/fuzz_gguf.py -runs=2000 -seed=1 /tmp/work-corpus fuzz/corpus/gguf
    python fuzz/fuzz_gguf.py --replay FILE ...
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402

harness.FORMATS = (*harness.FORMATS, "gguf")
harness._FILE_NAME["gguf"] = "input.gguf"
harness._MODULES = (*harness._MODULES, "treetool.io.gguf")


def make_corpus() -> None:
    """Seeds written by gguf-py: plain and Q8_0/Q4_0 tensors, metadata of every value type."""
    import tempfile

    import gguf
    import numpy as np

    out = os.path.join(HERE, "corpus", "gguf")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        for name, quant in (("plain", None), ("q8_0", gguf.GGMLQuantizationType.Q8_0),
                            ("q4_0", gguf.GGMLQuantizationType.Q4_0)):  # fmt: skip
            path = os.path.join(tmp, f"{name}.gguf")
            w = gguf.GGUFWriter(path, "llama")
            w.add_name(name)
            w.add_context_length(128)
            w.add_uint8("t.u8", 1)
            w.add_int16("t.i16", -2)
            w.add_float64("t.f64", 0.25)
            w.add_bool("t.bool", True)
            w.add_array("t.nested", [[1, 2], [3]])
            w.add_token_list(["<s>", "a", "b"])
            x = rng.standard_normal((2, 32)).astype(np.float32)
            if quant is None:
                w.add_tensor("blk.0.w", x)
                w.add_tensor("blk.0.h", x.astype(np.float16))
            else:
                q = gguf.quants.quantize(x, quant)
                w.add_tensor("blk.0.w", q, raw_shape=q.shape, raw_dtype=quant)
            w.write_header_to_file()
            w.write_kv_data_to_file()
            w.write_tensors_to_file()
            w.close()
            with open(path, "rb") as src, open(os.path.join(out, f"{name}.gguf"), "wb") as dst:
                dst.write(src.read())


if __name__ == "__main__":
    if sys.argv[1:2] == ["--make-corpus"]:
        make_corpus()
        sys.exit(0)
    sys.exit(harness.main([sys.argv[0], "gguf", *sys.argv[1:]]))
