"""A server claiming a huge file whose every byte it will send (issue 26): an npz whose end
record claims a huge central directory, a flax msgpack claiming a huge numpy scalar or string.
The budgets of local files hold remotely too, checked before the read is issued: one line,
well under 1 GB. The same files made locally (sparse) get the same line.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _files import msgpack_array_header, msgpack_str, msgpack_uint
from _servers import LyingServer
from harness import assert_contained, run_cli

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
]

SIZE = 1_500_000_000  # what the server claims; it sends zeros where nothing was put
BIG = 1_200_000_000


def _npz_tail() -> bytes:
    """An end record: one member, a 1.2 GB central directory ending where the record starts."""
    return b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, 1, 1, BIG, SIZE - 22 - BIG, 0)


def _msgpack_scalar() -> bytes:
    """{"x": numpy scalar ext of 300M float32s}: the payload lies in the zeros."""
    nb = BIG
    inner = b"\x93" + msgpack_array_header(1) + msgpack_uint(nb // 4) + msgpack_str("float32")
    inner += b"\xc6" + struct.pack(">I", nb)
    ext = b"\xc9" + struct.pack(">I", len(inner) + nb) + b"\x03" + inner
    return b"\x81" + msgpack_str("x") + ext


def _msgpack_string() -> bytes:
    return b"\x81" + msgpack_str("x") + b"\xdb" + struct.pack(">I", BIG)


CASES = {
    "dir.npz": (b"PK\x03\x04" + bytes(26), _npz_tail(), "the zip's central directory claims 1200000000 bytes for 1 "
                "members, more than 69678"),
    "scalar.msgpack": (_msgpack_scalar(), b"", "a numpy scalar of 1200000000 bytes, more than 64"),
    "string.msgpack": (_msgpack_string(), b"", "a string of 1200000000 bytes, more than 16777216"),
}  # fmt: skip


@pytest.fixture(scope="module")
def server() -> Iterator[LyingServer]:
    srv = LyingServer({})
    for name, (head, tail, _) in CASES.items():
        srv.sparse[name] = (SIZE, head, tail)
    yield srv
    srv.stop()


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("command", ["ls", "inspect"])
def test_remote_claims_of_huge_reads_are_refused_before_reading(
    server: LyingServer, tmp_path: Any, name: str, command: str
) -> None:
    server.requests.clear()
    url = f"{server.url}/sparse/{name}"
    flags = ["--no-tui"] if command == "inspect" else []
    run = run_cli(command, *flags, url, cwd=tmp_path)
    assert_contained(run, max_rss=300 << 20)
    assert run.stderr.startswith(f"treetool: error: {url}: ")
    assert CASES[name][2] in run.stderr
    assert len(server.requests) <= 3  # the first block, the end record: nothing big


@pytest.mark.parametrize("name", list(CASES))
def test_local_sparse_files_get_the_same_budget(tmp_path: Any, name: str) -> None:
    head, tail, expected = CASES[name]
    path = Path(tmp_path) / name
    with open(path, "wb") as fh:
        fh.write(head)
        fh.truncate(SIZE - len(tail))  # sparse: no disk used
        fh.seek(SIZE - len(tail))
        fh.write(tail)
    run = run_cli("ls", name, cwd=tmp_path)
    assert_contained(run, max_rss=300 << 20)
    assert run.stderr.startswith(f"treetool: error: {name}: ")
    assert expected in run.stderr
