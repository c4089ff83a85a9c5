"""The HTTP framing fuzz harness (`fuzz/http_framing.py`): its seeds replay as written, its
doctests hold, it is not blind (a client that reads past its limit, or calls an answer whole
with bytes after it, is a finding), and a short seeded atheris run over
`treetool/io/_sources/_wire.py` finds nothing."""

from __future__ import annotations

import doctest
import importlib.util
import os
import subprocess
import sys
import types

import pytest
from cli_runner import small_parent

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FUZZ = os.path.join(ROOT, "fuzz")
HARNESS = os.path.join(FUZZ, "http_framing.py")
SEEDS = os.path.join(FUZZ, "corpus", "http")


def _module() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("fuzz_http_framing", HARNESS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_http_framing_harness_doctests() -> None:
    result = doctest.testmod(_module())
    assert result.failed == 0 and result.attempted >= 6


def test_seeds_are_the_harness_seeds_and_replay_as_expected() -> None:
    m = _module()
    on_disk = {}
    for n in sorted(os.listdir(SEEDS)):
        with open(os.path.join(SEEDS, n), "rb") as fh:
            on_disk[n] = fh.read()
    assert on_disk == m.SEEDS
    h = m.FramingHarness()
    said = {n: h.one(data) for n, data in on_disk.items()}
    assert said == {
        "chunked.http": "ok: 200 body 5 whole kept",
        "continue.http": "ok: 200 body 6 closed",
        "extra.http": "ok: 206 body 2 closed",  # bytes past the answer: never kept
        "head.http": "ok: 200 body 0 closed",
        "ok.http": "ok: 206 body 5 whole kept",
        "te-gzip.http": "BadHttp: a Transfer-Encoding other than chunked",
        "two-answers.http": "ok: 206 body 2 closed",
        "two-lengths.http": "BadHttp: conflicting Content-Length headers",
    }


def test_a_body_past_its_limit_is_a_finding() -> None:
    """Limit 0 (first byte 0x00): a client that read all 9 bytes would be a finding."""
    m = _module()
    h = m.FramingHarness()
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n123456789"
    assert h.one(b"\x00" + answer) == "ok: 200 body 1 closed"
    wire = h.wire

    class Greedy(wire.Connection):
        __slots__ = ()

        def body(self, method: str, headers: dict, limit: int) -> tuple[bytes, bool]:
            return self.rfile.read(int(headers["content-length"])), True

    h.wire = types.SimpleNamespace(Connection=Greedy, BadHttp=wire.BadHttp, Dropped=wire.Dropped)
    with pytest.raises(AssertionError, match="a body of 9 bytes past a limit of 0"):
        h.one(b"\x00" + answer)


def test_a_connection_kept_with_bytes_after_it_is_a_finding() -> None:
    m = _module()
    h = m.FramingHarness()
    wire = h.wire

    class Trusting(wire.Connection):
        __slots__ = ()

        def unread(self) -> bool:
            return False  # (the bug of issue 39: the buffer was never looked at)

    h.wire = types.SimpleNamespace(Connection=Trusting, BadHttp=wire.BadHttp, Dropped=wire.Dropped)
    with pytest.raises(AssertionError, match="called whole with bytes unread after it"):
        h.one(m.SEEDS["extra.http"])


@pytest.mark.timeout(300)
def test_bounded_seeded_run_finds_nothing(tmp_path) -> None:
    work, art = tmp_path / "work", tmp_path / "artifacts"
    work.mkdir()
    art.mkdir()
    cmd = [
        sys.executable,
        HARNESS,
        "-runs=3000",
        "-seed=1",
        "-timeout=20",
        "-print_final_stats=1",
        f"-artifact_prefix={art}{os.sep}",
        str(work),
        SEEDS,
    ]
    r = subprocess.run(small_parent(cmd), cwd=tmp_path, capture_output=True, text=True, timeout=280)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "stat::number_of_executed_units: 3000" in r.stderr
    assert os.listdir(art) == []
