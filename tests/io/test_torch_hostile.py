"""Hostile torch files: each is refused in one `LoadError` line naming the file, the record or
storage and what was expected; nothing runs, nothing huge is allocated."""

from __future__ import annotations

import functools
import os
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_runner import together
from torch_craft import Fake, FakeStorage, craft

import treetool.io as tio
from treetool import LoadError

F32 = np.arange(12, dtype=np.float32).tobytes()


def _read_error(path: str) -> str:
    with pytest.raises(LoadError) as e:
        tio.read(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(path)
    return msg


def test_a_crafted_file_reads(tmp_path: os.PathLike) -> None:
    p = str(tmp_path / "ok.pt")
    s = FakeStorage("0", 12)
    craft(p, {"a": Fake(s, 0, (3, 4), (4, 1)), "col": Fake(s, 1, (3,), (4,))}, {"data/0": F32})
    tree = tio.load(p)
    assert np.asarray(tree["col"]).tolist() == [1.0, 5.0, 9.0]
    assert np.asarray(tree["a"]).tolist() == np.arange(12, dtype=np.float32).reshape(3, 4).tolist()


def test_storage_record_shorter_than_numel(tmp_path: os.PathLike) -> None:
    p = str(tmp_path / "short.pt")
    craft(p, {"a": Fake(FakeStorage("0", 12), 0, (12,), (1,))}, {"data/0": F32[:40]})
    assert _read_error(p) == (
        f"{p}[x/data/0]: storage record of 40 bytes, shorter than its 12 elements of "
        "torch.FloatStorage (48 bytes)"
    )


def test_storage_key_not_in_archive(tmp_path: os.PathLike) -> None:
    p = str(tmp_path / "nokey.pt")
    craft(p, {"a": Fake(FakeStorage("7", 12), 0, (12,), (1,))}, {"data/0": F32})
    msg = _read_error(p)
    assert "storage key '7' is not in the archive (no x/data/7)" in msg


@pytest.mark.parametrize(
    ("offset", "size", "stride", "last"),
    [(0, (13,), (1,), 12), (10, (3,), (1,), 12), (0, (2, 7), (6, 1), 12), (1, (4,), (4,), 13)],
)
def test_view_past_its_storage(
    tmp_path: os.PathLike, offset: int, size: tuple, stride: tuple, last: int
) -> None:
    p = str(tmp_path / "past.pt")
    craft(p, {"a": Fake(FakeStorage("0", 12), offset, size, stride)}, {"data/0": F32})
    msg = _read_error(p)
    assert f"reaches element {last}, past the storage's 12 elements" in msg


@pytest.mark.parametrize(
    ("offset", "size", "stride", "what"),
    [(-1, (2,), (1,), "storage offset -1"), (0, (2,), (-1,), "stride [-1]"),
     (0, (2, 2), (1,), "2 dims with 1 strides"), (0, (1 << 60,), (1,), "size")],
)  # fmt: skip
def test_bad_tensor_arguments(
    tmp_path: os.PathLike, offset: int, size: tuple, stride: tuple, what: str
) -> None:
    p = str(tmp_path / "bad.pt")
    craft(p, {"a": Fake(FakeStorage("0", 12), offset, size, stride)}, {"data/0": F32})
    assert what in _read_error(p)


def test_overlapping_records(tmp_path: os.PathLike) -> None:
    p = str(tmp_path / "overlap.pt")
    craft(p, {"a": Fake(FakeStorage("0", 12), 0, (12,), (1,))}, {"data/0": F32, "data/1": F32})
    with zipfile.ZipFile(p) as z:
        first = z.getinfo("x/data/0").header_offset
        second = z.getinfo("x/data/1").header_offset
    raw = bytearray(Path(p).read_bytes())
    # point data/1's central entry at data/0's local header
    at = raw.find(b"x/data/1", raw.find(b"PK\x01\x02")) - 46
    assert raw[at : at + 4] == b"PK\x01\x02"
    struct.pack_into("<I", raw, at + 42, first)
    assert struct.unpack_from("<I", raw, at + 42)[0] != second
    Path(p).write_bytes(bytes(raw))
    msg = _read_error(p)
    assert "overlap" in msg or "bad zip local header" in msg


def test_zip_bomb_claim(tmp_path: os.PathLike) -> None:
    p = str(tmp_path / "bomb.pt")
    craft(p, {"a": 1}, {"data/0": b"\0" * 4096}, method=zipfile.ZIP_DEFLATED)
    raw = bytearray(Path(p).read_bytes())
    at = raw.find(b"x/data/0", raw.find(b"PK\x01\x02")) - 46
    struct.pack_into("<I", raw, at + 24, 0xFFFFFFF0)  # claims 4 GiB from a few bytes
    Path(p).write_bytes(bytes(raw))
    assert "(a zip bomb?)" in _read_error(p)


def test_deflated_records_read(tmp_path: os.PathLike) -> None:
    """A repacked (deflated) file reads through the bounded inflater."""
    src = str(tmp_path / "plain.pt")
    torch.save({"w": torch.arange(3000.0), "v": torch.arange(10.0)[::3]}, src)
    p = str(tmp_path / "repacked.pt")
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as b:
        for info in a.infolist():
            b.writestr(info.filename, a.read(info))
    tree = tio.load(p)
    assert np.asarray(tree["w"]).tolist() == list(range(3000))
    assert np.asarray(tree["v"]).tolist() == [0.0, 3.0, 6.0, 9.0]


def test_nothing_runs_in_a_genuine_zip(tmp_path: os.PathLike) -> None:
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self) -> object:
            return (os.system, (f"touch {marker}",))

    p = str(tmp_path / "evil.pt")
    torch.save({"x": Evil(), "w": torch.ones(2)}, p)
    r = tio.read(p)
    assert r.blocked == ["posix.system"] and not marker.exists()
    assert r.tree["x"].class_path == "posix.system"


def test_big_endian_refused(tmp_path: os.PathLike) -> None:
    p = str(tmp_path / "be.pt")
    craft(p, {"a": 1}, {})
    with zipfile.ZipFile(p) as z:
        records = {i.filename: z.read(i) for i in z.infolist()}
    records["x/byteorder"] = b"big"
    with zipfile.ZipFile(p, "w") as z:
        for n, d in records.items():
            z.writestr(n, d)
    assert _read_error(p) == f"{p}: a 'big'-endian checkpoint; only little-endian is read"


def test_legacy_truncated_storage(tmp_path: os.PathLike) -> None:
    p = str(tmp_path / "legacy.pt")
    torch.save({"w": torch.arange(100.0)}, p, _use_new_zipfile_serialization=False)
    Path(p).write_bytes(Path(p).read_bytes()[:-50])
    assert "bytes at offset" in _read_error(p)


def test_tar_format_is_named(tmp_path: os.PathLike) -> None:
    import tarfile

    p = str(tmp_path / "old.tar.pt")
    with tarfile.open(p, "w", format=tarfile.PAX_FORMAT) as t:
        for name in ("sys_info", "pickle", "storages", "tensors"):
            f = tmp_path / name
            f.write_bytes(b"\x80\x02K\x00.")
            t.add(str(f), arcname=name)
    assert "old tar format (torch < 0.4): recognised, not read" in _read_error(p)


def _harness() -> object:
    import importlib.util
    import sys

    if "hostile_harness" not in sys.modules:
        path = os.path.join(os.path.dirname(__file__), "..", "hostile", "harness.py")
        spec = importlib.util.spec_from_file_location("hostile_harness", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["hostile_harness"] = module
        spec.loader.exec_module(module)
    return sys.modules["hostile_harness"]


def _hostile_files(d: Path) -> list[str]:
    """Each a genuine torch zip or legacy file made hostile one way."""
    craft(
        str(d / "short.pt"), {"a": Fake(FakeStorage("0", 12), 0, (12,), (1,))}, {"data/0": F32[:8]}
    )
    craft(str(d / "nokey.pt"), {"a": Fake(FakeStorage("9", 12), 0, (12,), (1,))}, {})
    craft(str(d / "past.pt"), {"a": Fake(FakeStorage("0", 12), 5, (4, 4), (4, 1))}, {"data/0": F32})
    craft(
        str(d / "huge.pt"),
        {"a": Fake(FakeStorage("0", 1 << 40), 0, (1 << 40,), (1,))},
        {"data/0": F32},
    )
    craft(str(d / "bomb.pt"), {"a": 1}, {"data/0": b"\0" * 4096}, method=zipfile.ZIP_DEFLATED)
    raw = bytearray((d / "bomb.pt").read_bytes())
    at = raw.find(b"x/data/0", raw.find(b"PK\x01\x02")) - 46
    struct.pack_into("<I", raw, at + 24, 0xFFFFFFF0)
    (d / "bomb.pt").write_bytes(bytes(raw))
    torch.save({"w": torch.arange(1000.0)}, d / "legacy.pt", _use_new_zipfile_serialization=False)
    (d / "cut.pt").write_bytes((d / "legacy.pt").read_bytes()[:-100])
    torch.save({"w": torch.ones(2)}, d / "ok.pt")
    (d / "torn.pt").write_bytes((d / "ok.pt").read_bytes()[:-30])  # the directory cut off
    return ["short.pt", "nokey.pt", "past.pt", "huge.pt", "bomb.pt", "cut.pt", "torn.pt"]


@pytest.mark.slow
def test_cli_on_hostile_files_stays_contained(tmp_path: Path) -> None:
    h = _harness()
    d = tmp_path / "files"
    d.mkdir()
    cases = [(name, cmd) for name in _hostile_files(d) for cmd in ("ls", "inspect")]
    cwds = [tmp_path / f"run{i}" for i in range(len(cases))]  # each run's own scratch folder
    for cwd in cwds:
        cwd.mkdir()
    runs = together(  # independent runs, side by side
        *(
            functools.partial(
                h.run_cli, cmd, *(("--json",) if cmd == "inspect" else ()), str(d / name), cwd=cwd
            )
            for (name, cmd), cwd in zip(cases, cwds)
        )
    )
    for (name, _), run in zip(cases, runs):
        h.assert_contained(run, max_rss=400 << 20)
        assert name in run.stderr, run


def test_deflated_data_pkl_is_bounded(tmp_path: Path) -> None:
    """A repacked file whose data.pkl inflates far beyond the file's size is refused before
    it is inflated (64 bytes per byte of the file, plus 16 MiB)."""
    p = tmp_path / "pklbomb.pt"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        z.writestr("x/data.pkl", b"N" * (64 << 20) + b".")
    msg = _read_error(str(p))
    assert "x/data.pkl]: record of 67108865 bytes, more than the" in msg


def test_stride_zero_bomb(tmp_path: Path) -> None:
    """A stride-0 view of one element claiming 2**40 elements is refused: reading it would
    allocate them all."""
    p = str(tmp_path / "expand.pt")
    craft(p, {"a": Fake(FakeStorage("0", 1), 0, (1 << 20, 1 << 20), (0, 0))}, {"data/0": F32[:4]})
    assert "(a stride-0 bomb?)" in _read_error(p)
    q = str(tmp_path / "fine.pt")
    torch.save({"b": torch.arange(3.0).expand(1000, 3)}, q)  # an expanded bias: read as it is
    assert np.asarray(tio.load(q)["b"]).tolist() == [[0.0, 1.0, 2.0]] * 1000
