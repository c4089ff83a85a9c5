"""A URL-backed `LazyArray` reads its bytes with only the leaf types imported.

The `Source` of a URL comes from the scheme registry below the leaf types
(`treetool._source`), which imports the remote source module of the URL's scheme when it is
first read: nobody has to import `treetool.io` (or load a file) first. Each case runs in a
fresh interpreter that imports `treetool._leaves` and nothing else of treetool, against the
ranged HTTP server of `storage_servers`.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from storage_servers import HttpServer

from treetool._leaves._lazy_array import LazyArray

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
VALUES = np.arange(24, dtype="<f4").reshape(4, 6) * 1.5
OFFSET = 37  # payload bytes after a 37-byte prefix: a ranged read, not the whole file


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> object:
    root = tmp_path_factory.mktemp("alone")
    (root / "w.bin").write_bytes(b"x" * OFFSET + VALUES.tobytes() + b"tail")
    srv = HttpServer(str(root))
    yield srv
    srv.stop()


def _run(setup: str) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(setup) + textwrap.dedent(_CHECK)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


_CHECK = """
    import sys
    import numpy as np
    assert not [m for m in sys.modules if m.startswith("treetool.io")], "io imported early"
    got = np.asarray(x)
    assert "treetool.io._sources._http" in sys.modules  # registered when the URL was read
    print(got.dtype, got.shape, got.tolist())
    print(x[2].tolist())
"""


def _expected() -> str:
    return f"float32 (4, 6) {VALUES.tolist()}\n{VALUES[2].tolist()}\n"


def test_a_url_lazy_array_built_with_only_the_leaf_types_reads_over_http(
    server: HttpServer,
) -> None:
    url = f"{server.url}/w.bin"
    run = _run(
        f"""
        from treetool._leaves._lazy_array import LazyArray
        x = LazyArray((4, 6), "float32", {url!r}, {OFFSET})
        """
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == _expected()
    assert run.stderr == ""


def test_an_unpickled_url_lazy_array_reads_over_http(server: HttpServer) -> None:
    url = f"{server.url}/w.bin"
    blob = pickle.dumps(LazyArray((4, 6), "float32", url, OFFSET))
    run = _run(
        f"""
        import pickle, sys
        import treetool._leaves
        from treetool._leaves._lazy_array import LazyArray
        x = pickle.loads({blob!r})  # the pickle names LazyArray by its public path
        assert type(x) is LazyArray
        """
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == _expected()
    assert run.stderr == ""
