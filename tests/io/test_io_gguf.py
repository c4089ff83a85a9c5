"""GGUF files written by llama.cpp's own writer (gguf-py's `GGUFWriter`) in the test run, read
by treetool and checked against gguf-py's `GGUFReader` and `gguf.quants.dequantize`."""

from __future__ import annotations

import json
import os

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

import treetool as tt
from treetool.io import detect, read
from treetool.io.gguf import GGMLArray

RNG = np.random.default_rng(0)
W_F32 = RNG.standard_normal((4, 64)).astype(np.float32)
W_F16 = RNG.standard_normal((3, 32)).astype(np.float16)
W_Q8 = RNG.standard_normal((8, 96)).astype(np.float32)
W_Q4 = RNG.standard_normal((2, 3, 64)).astype(np.float32)
W_I32 = np.arange(10, dtype=np.int32)


def _write(path: str, alignment: int | None = None) -> str:
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("tiny")
    w.add_context_length(2048)
    w.add_file_type(7)
    w.add_quantization_version(2)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4_000_000_000)
    w.add_int32("t.i32", -2_000_000_000)
    w.add_float32("t.f32", 0.5)
    w.add_uint64("t.u64", 2**63 + 5)
    w.add_int64("t.i64", -(2**62))
    w.add_float64("t.f64", 1e-300)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo\x1b[31m")
    w.add_array("t.ints", [1, 2, 3])
    w.add_array("t.strs", ["a", "bc"])
    w.add_array("t.nested", [[1, 2], [3]])
    w.add_token_list([f"tok{i}" for i in range(100)])
    w.add_tensor("token_embd.weight", W_F32)
    w.add_tensor("blk.0.attn_q.weight", W_F16)
    q8 = gguf.quants.quantize(W_Q8, Q.Q8_0)
    w.add_tensor("blk.0.ffn_up.weight", q8, raw_shape=q8.shape, raw_dtype=Q.Q8_0)
    q4 = gguf.quants.quantize(W_Q4, Q.Q4_0)
    w.add_tensor("blk.1.ffn_down.weight", q4, raw_shape=q4.shape, raw_dtype=Q.Q4_0)
    w.add_tensor("pos", W_I32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    return _write(str(tmp_path_factory.mktemp("gguf") / "tiny.gguf"))


def test_detect_and_names(model):
    assert detect(model) == "gguf"
    loaded = read(model)
    assert loaded.format == "gguf"
    assert list(loaded.tree) == [
        "token_embd.weight",
        "blk.0.attn_q.weight",
        "blk.0.ffn_up.weight",
        "blk.1.ffn_down.weight",
        "pos",
    ]


def test_tensors_match_gguf_reader(model):
    tree = read(model).tree
    ref = gguf.GGUFReader(model)
    assert len(ref.tensors) == len(tree)
    for t in ref.tensors:
        leaf = tree[t.name]
        shape = tuple(int(d) for d in reversed(t.shape))
        assert leaf.shape == shape
        if isinstance(leaf, GGMLArray):
            want = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape)
        else:  # plain types: gguf-py's own view of the bytes
            want = np.asarray(t.data).reshape(shape)
        got = np.asarray(leaf)
        assert got.dtype == want.dtype, t.name
        np.testing.assert_array_equal(got, want)
        assert leaf.offset == int(t.data_offset)  # gguf-py: absolute
        assert leaf.nbytes == int(t.n_bytes)


def test_plain_and_quantized_leaves(model):
    tree = read(model).tree
    f32, f16, q8, q4, pos = tree.values()
    assert type(f32) is tt.LazyArray and (f32.shape, f32.dtype_name) == ((4, 64), "float32")
    assert type(f16) is tt.LazyArray and (f16.shape, f16.dtype_name) == ((3, 32), "float16")
    assert type(pos) is tt.LazyArray and pos.dtype_name == "int32"
    np.testing.assert_array_equal(np.asarray(f32), W_F32)
    np.testing.assert_array_equal(np.asarray(f16), W_F16)
    np.testing.assert_array_equal(np.asarray(pos), W_I32)
    assert isinstance(q8, GGMLArray) and q8.ggml_type == "Q8_0"
    assert q8.shape == (8, 96) and q8.bits_per_weight == 8.5 and q8.nbytes == 8 * 3 * 34
    assert isinstance(q4, GGMLArray) and q4.ggml_type == "Q4_0"
    assert q4.shape == (2, 3, 64) and q4.bits_per_weight == 4.5 and q4.nbytes == 12 * 18
    # quantized close to what was written
    assert np.abs(np.asarray(q8) - W_Q8).max() < 0.02
    # params count logical weights; bytes are the bytes on disk
    info = tt.leaf_info(q4)
    assert (info.params, info.nbytes, info.shape, info.dtype) == (384, 216, (2, 3, 64), "float32")
    assert q8.where()["ggml_type"] == "Q8_0"
    chunks = list(q8.iter_chunks(max_elems=64))
    assert [c.size for c in chunks] == [64] * 12
    np.testing.assert_array_equal(np.concatenate(chunks), np.asarray(q8).reshape(-1))


def test_metadata_values(model):
    loaded = read(model)
    meta = loaded.metadata
    ref = gguf.GGUFReader(model)
    assert meta["general.architecture"] == "llama"
    assert meta["general.name"] == "tiny"
    assert meta["llama.context_length"] == 2048
    assert meta["general.file_type"] == 7
    assert meta["general.quantization_version"] == 2
    expect = {
        "t.u8": 200,
        "t.i8": -100,
        "t.u16": 60000,
        "t.i16": -30000,
        "t.u32": 4_000_000_000,
        "t.i32": -2_000_000_000,
        "t.f32": 0.5,
        "t.u64": 2**63 + 5,
        "t.i64": -(2**62),
        "t.f64": 1e-300,
        "t.bool": True,
        "t.str": "héllo\x1b[31m",
        "t.ints": [1, 2, 3],
        "t.strs": ["a", "bc"],
        "t.nested": [[1, 2], [3]],
    }
    for key, value in expect.items():
        assert meta[key] == value, key
        assert type(meta[key]) is type(value), key
    for key, value in expect.items():
        if key != "t.nested":  # gguf-py's contents() flattens nested arrays ([1, 2, 3])
            assert ref.fields[key].contents() == value, key
    # the vocab (100 strings) is summarised
    assert meta["tokenizer.ggml.tokens"].startswith("[100 str values: 'tok0', 'tok1'")
    assert set(meta) == set(ref.fields) - {"GGUF.version", "GGUF.tensor_count", "GGUF.kv_count"}
    assert loaded.facts == {
        "gguf": {
            "version": 3,
            "tensors": 5,
            "files": 1,
            "alignment": 32,
            "data_offset": ref.data_offset,
        }
    }


def test_custom_alignment(tmp_path):
    p = _write(str(tmp_path / "a.gguf"), alignment=64)
    ref = gguf.GGUFReader(p)
    tree = read(p).tree
    assert ref.data_offset % 64 == 0
    assert tree["token_embd.weight"].offset == ref.data_offset
    np.testing.assert_array_equal(np.asarray(tree["pos"]), W_I32)


def test_cli_inspect(model, capsys):
    from treetool.cli import main

    assert main(["inspect", "--json", model]) == 0
    text = json.dumps(json.loads(capsys.readouterr().out))
    assert '"general.architecture": "llama"' in text
    assert "blk.0.ffn_up.weight" in text
    assert main(["inspect", model]) == 0
    out = capsys.readouterr().out
    assert "blk.0.ffn_up.weight" in out
    assert "\x1b" not in out  # the metadata's escape reaches the terminal escaped


def test_unsupported_quant_type_is_a_leaf_with_one_line_error(tmp_path):
    p = str(tmp_path / "k.gguf")
    w = gguf.GGUFWriter(p, "llama")
    raw = np.zeros((2, 144), np.uint8)  # two Q4_K blocks of 256 weights
    w.add_tensor("w", raw, raw_shape=raw.shape, raw_dtype=Q.Q4_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    leaf = read(p).tree["w"]
    assert (leaf.shape, leaf.ggml_type, leaf.nbytes, leaf.bits_per_weight) == (
        (2, 256),
        "Q4_K",
        288,
        4.5,
    )
    with pytest.raises(tt.LoadError, match="dequantizing ggml type Q4_K is not supported"):
        np.asarray(leaf)
    assert os.path.getsize(p) >= leaf.offset + 288


def test_split_files_are_one_tree(tmp_path):
    from pathlib import Path

    w = gguf.GGUFWriter(str(tmp_path / "m.gguf"), "llama", split_max_tensors=2)
    w.add_name("split")
    arrays = {f"blk.{i}.w": np.full((2, 4), i, np.float32) for i in range(5)}
    for name, a in arrays.items():
        w.add_tensor(name, a)
    w.write_header_to_file(path=Path(tmp_path / "m.gguf"))
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    names = sorted(os.listdir(tmp_path))
    assert names == [f"m-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    for start in (names[0], names[2]):  # from any of its files
        loaded = read(str(tmp_path / start))
        assert list(loaded.tree) == list(arrays)
        assert loaded.facts["gguf"]["files"] == 3
        assert loaded.metadata["general.name"] == "split"
        assert loaded.tree["blk.4.w"].file == str(tmp_path / names[2])
        for name, a in arrays.items():
            np.testing.assert_array_equal(np.asarray(loaded.tree[name]), a)
    os.remove(tmp_path / names[1])
    with pytest.raises(tt.LoadError, match="part 2 of 3 of the split set is missing"):
        read(str(tmp_path / names[0]))


@pytest.mark.parametrize("qtype", [Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0])
def test_dequantized_bit_for_bit(tmp_path, qtype):
    x = np.random.default_rng(int(qtype)).standard_normal((6, 128)).astype(np.float32) * 3
    x[0, :32] = 0.0  # a block of zeros (scale 0)
    p = str(tmp_path / "q.gguf")
    w = gguf.GGUFWriter(p, "llama")
    q = gguf.quants.quantize(x, qtype)
    w.add_tensor("w", q, raw_shape=q.shape, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    leaf = read(p).tree["w"]
    want = gguf.quants.dequantize(gguf.GGUFReader(p).tensors[0].data, qtype)
    got = np.asarray(leaf)
    assert (got.shape, got.dtype, leaf.ggml_type) == ((6, 128), np.float32, qtype.name)
    assert got.tobytes() == np.ascontiguousarray(want, np.float32).tobytes()
    assert np.concatenate(list(leaf.iter_chunks(max_elems=100))).tobytes() == got.tobytes()
