"""Hostile inputs on the fidelity features: metadata text, saved-path maps, orbax runs and
JSON items, `@STEP`, `--like`, and bytes that look like two formats at once."""

from __future__ import annotations

import json
import struct

import numpy as np
from harness import assert_contained, run_cli

_ESC = "\x1b]0;pwned\x07\x1b[31m\u202e"


def _safetensors(path, metadata: dict, names=("a.b",)) -> None:
    header: dict = {}
    for i, name in enumerate(names):
        header[name] = {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}
    header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    data = np.arange(len(names), dtype=np.float32).tobytes()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def test_metadata_with_escape_sequences_is_shown_escaped(tmp_path):
    _safetensors(tmp_path / "m.safetensors", {"format": "pt", "note": _ESC})
    run = run_cli("inspect", "m.safetensors", "--no-tui", cwd=tmp_path)
    assert_contained(run, rc=0)
    assert run.stdout.splitlines()[0].startswith('metadata: {"format": "pt", "note": "\\u001b]0;')
    run = run_cli("ls", "m.safetensors", "--json", cwd=tmp_path)
    assert_contained(run, rc=0)
    assert json.loads(run.stdout)["metadata"] == {"format": "pt", "note": _ESC}


def test_a_forged_saved_paths_map_cannot_break_the_tree(tmp_path):
    # names that collide, a path with escapes, a map that names the wrong tensors: each is
    # refused or read as what it says, never a crash
    forged = [
        {"a.b": "['x']", "c": "['x']"},  # two tensors onto one path: ignored
        {"a.b": "['" + _ESC + "']", "c": "['y']"},  # escapes in a key: shown escaped
        {"zzz": "['x']"},  # names no tensor of the file: ignored
        "[" * 100_000,  # not a map at all (deep JSON): ignored
    ]
    for i, m in enumerate(forged):
        f = tmp_path / f"f{i}.safetensors"
        text = m if isinstance(m, str) else json.dumps(m)
        _safetensors(f, {"format": "treetool", "treetool_paths": text}, names=("a.b", "c"))
        run = run_cli("ls", f.name, cwd=tmp_path)
        assert_contained(run, rc=0, ls_fields=True)
        assert len(run.stdout.splitlines()) == 2


def test_orbax_run_with_a_deep_json_item_is_one_error_line(tmp_path):
    step = tmp_path / "run" / "1"
    (step / "meta").mkdir(parents=True)
    (step / "_CHECKPOINT_METADATA").write_text("{}")
    (step / "meta" / "metadata").write_text("[" * 200_000 + "]" * 200_000)
    run = run_cli("ls", "run", cwd=tmp_path)
    assert_contained(run)
    # the JSON budget refuses it before json.loads would recurse
    assert "run/1/meta/metadata: more than " in run.stderr
    assert "JSON objects and arrays in 400000 bytes" in run.stderr


def test_orbax_json_item_with_escapes_lists_cleanly(tmp_path):
    step = tmp_path / "run" / "3"
    (step / "meta").mkdir(parents=True)
    (step / "_CHECKPOINT_METADATA").write_text("{}")
    (step / "meta" / "metadata").write_text(json.dumps({_ESC: [1, 2], "lr": 0.5}))
    (step / "junk").mkdir()  # not an item treetool can read: shown, not dropped
    run = run_cli("ls", "run", cwd=tmp_path)
    assert_contained(run, rc=0, ls_fields=True)
    assert "['junk']\t-\t" in run.stdout and "['meta']['lr']\t-\t0.5" in run.stdout
    run = run_cli("ls", "run@4", cwd=tmp_path)
    assert_contained(run)
    assert run.stderr == "treetool: error: run: no step 4; its steps: 3\n"


def test_step_on_a_file_and_bad_like_are_one_error_line(tmp_path):
    np.savez(tmp_path / "a.npz", w=np.zeros(2, np.float32))
    run = run_cli("ls", "a.npz@3", cwd=tmp_path)
    assert_contained(run)
    run = run_cli("ls", "a.npz", "--step", "3", cwd=tmp_path)
    assert_contained(run)
    assert "@STEP picks a step of an orbax run; this is a npz file" in run.stderr
    run = run_cli("ls", "a.npz", "--like", "a.npz", cwd=tmp_path)
    assert_contained(run)
    assert "--like a.npz: expected module:attr" in run.stderr


def test_eqx_file_shorter_than_its_skeleton(tmp_path):
    (tmp_path / "skel.py").write_text(
        "import numpy as np\ndef make():\n    return [np.zeros(2, np.float32)] * 3\n"
    )
    with open(tmp_path / "m.eqx", "wb") as fh:
        np.save(fh, np.zeros(2, np.float32))
        np.save(fh, np.zeros(2, np.float32))
    run = run_cli("ls", "m.eqx", "--like", "skel:make", cwd=tmp_path)
    assert_contained(run)
    assert "the file has 2 array/scalar leaves, the skeleton (`like`) has more" in run.stderr
    assert "[2]" in run.stderr


def test_bytes_that_start_like_a_pickle_but_are_not_one(tmp_path):
    # 0x80 0x05 then a byte that is no pickle opcode, and no consistent safetensors header
    (tmp_path / "x.bin").write_bytes(b"\x80\x05\x00\x00\x00\x00\x00\x00{}" + b"\x00" * 64)
    run = run_cli("ls", "x.bin", cwd=tmp_path)
    assert_contained(run)
    assert "unknown file format (starts with bytes 80 05 00 00" in run.stderr
