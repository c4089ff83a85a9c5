"""A torch zip record whose local header's extra field pushes its data into the next record
(or into the central directory) is refused in the same one line for a local file and over HTTP
(the local ranged server of tests/remote): the remote path reads a storage's local header only
when its values are first read, and checks the same extents then."""

from __future__ import annotations

import importlib.util
import os
import struct
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from torch_craft import Fake, FakeStorage, craft

import treetool.io as tio
from treetool import LoadError

pytestmark = pytest.mark.slow

F32 = np.arange(12, dtype=np.float32).tobytes()


def _servers() -> Any:
    path = os.path.join(os.path.dirname(__file__), "..", "remote", "storage_servers.py")
    if "storage_servers" not in sys.modules:
        spec = importlib.util.spec_from_file_location("storage_servers", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["storage_servers"] = module
        spec.loader.exec_module(module)
    return sys.modules["storage_servers"]


def _push(path: Path, name: str, by: int) -> None:
    """Grow `name`'s local extra-field length by `by` bytes, nothing else moved: its data now
    starts `by` bytes later and runs `by` bytes past where it ended."""
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        at = z.getinfo(name).header_offset
    assert raw[at : at + 4] == b"PK\x03\x04"
    (xlen,) = struct.unpack_from("<H", raw, at + 28)
    struct.pack_into("<H", raw, at + 28, xlen + by)
    path.write_bytes(bytes(raw))


def _write(root: Path, fname: str, pushed: str, by: int) -> Path:
    """A crafted torch file whose tensor `a` views the pushed record's storage."""
    p = root / fname
    s = FakeStorage(pushed.rpartition("/")[2], 12)
    craft(str(p), {"a": Fake(s, 0, (12,), (1,))}, {"data/0": F32, "data/1": F32})
    _push(p, pushed, by)
    return p


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("torch_overlap")
    files = {
        # data/0's data runs 16 bytes into data/1's local header
        "into_next.pt": _write(root, "into_next.pt", "x/data/0", 16),
        # the last record's data runs into the central directory
        "into_dir.pt": _write(root, "into_dir.pt", "x/data/1", 8),
        "ok.pt": _write(root, "ok.pt", "x/data/0", 0),
    }
    server = _servers().HttpServer(str(root))
    yield server, files
    server.stop()


def _local_error(path: str) -> str:
    with pytest.raises(LoadError) as e:
        tio.load(path)
    return str(e.value)


def _remote_error(url: str) -> str:
    tree = tio.load(url)  # listing reads no storage's local header
    with pytest.raises(LoadError) as e:
        np.asarray(tree["a"])
    return str(e.value)


@pytest.mark.parametrize(
    ("fname", "tail"),
    [
        ("into_next.pt", ": zip records 'x/data/0' and 'x/data/1' overlap"),
        ("into_dir.pt", "[x/data/1]: record data runs into the zip directory"),
    ],
)
def test_overlap_refused_locally_and_over_http(served: Any, fname: str, tail: str) -> None:
    server, files = served
    local = _local_error(str(files[fname]))
    assert local == f"{files[fname]}{tail}"
    remote = _remote_error(f"{server.url}/{fname}")
    assert remote == f"{server.url}/{fname}{tail}"
    assert "\n" not in remote


def test_unpushed_file_reads_locally_and_over_http(served: Any) -> None:
    server, files = served
    want = np.arange(12, dtype=np.float32).tolist()
    assert np.asarray(tio.load(str(files["ok.pt"]))["a"]).tolist() == want
    assert np.asarray(tio.load(f"{server.url}/ok.pt")["a"]).tolist() == want
