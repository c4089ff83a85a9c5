"""The fuzz harness's remote mode (`fuzz/harness.py FORMAT --remote`, `fuzz/remote.py`): the
input's first bytes script a local HTTP server that answers the reader's ranged reads, honestly
or with every lie the server knows; the reader raises only `LoadError` and connects nowhere else.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import types
from typing import Any

import pytest
from cli_runner import small_parent

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FUZZ = os.path.join(ROOT, "fuzz")


def _module(name: str, path: str) -> types.ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


remote = _module("remote", os.path.join(FUZZ, "remote.py"))
fuzz_harness = _module("fuzz_harness_remote", os.path.join(FUZZ, "harness.py"))


def _seed(fmt: str) -> bytes:
    d = os.path.join(FUZZ, "corpus", fmt)
    name = sorted(os.listdir(d))[0]
    with open(os.path.join(d, name), "rb") as fh:
        return fh.read()


@pytest.fixture(scope="module")
def harnesses() -> Any:
    """`harnesses(fmt)`: the remote-mode harness of `fmt` (one at a time: each sets the
    process's temporary directory to its own scratch folder)."""
    import shutil
    import tempfile

    current: dict[str, Any] = {}
    old = {k: os.environ.get(k) for k in ("TREETOOL_REMOTE_TIMEOUT", "TREETOOL_REMOTE_RETRIES")}

    def close() -> None:
        for h in current.values():
            h.remote.stop()
            h.other.stop()
            shutil.rmtree(h.root, ignore_errors=True)
        current.clear()
        tempfile.tempdir = None

    def get(fmt: str) -> Any:
        if fmt not in current:
            close()
            current[fmt] = fuzz_harness.Harness(fmt, remote=True)
        return current[fmt]

    yield get
    close()
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def test_an_honest_script_serves_the_file(harnesses: Any) -> None:
    h = harnesses("safetensors")
    assert (
        h.one(bytes(remote.SCRIPT_LEN) + _seed("safetensors")) == "loaded as safetensors, rendered"
    )


@pytest.mark.parametrize("lie", range(len(remote._LIES)))
@pytest.mark.parametrize("fmt", ["safetensors", "msgpack", "npz", "pickle"])
def test_every_lie_is_a_load_error_or_an_honest_result(harnesses: Any, fmt: str, lie: int) -> None:
    """Each lie on the first request, and on every request: only `LoadError`, no finding."""
    h = harnesses(fmt)
    seed = _seed(fmt)
    for script in (bytes([200 + lie]) + bytes(remote.SCRIPT_LEN - 1), bytes([200 + lie]) * 8):
        said = h.one(script + seed)
        assert said.startswith(("LoadError: http://127.0.0.1:", "loaded as")), said
    assert h.other.accepted == 0  # the redirect elsewhere was never followed


def test_a_bounded_seeded_remote_run_finds_nothing(tmp_path: Any) -> None:
    pytest.importorskip("atheris")
    seeds, work, art = tmp_path / "seeds", tmp_path / "work", tmp_path / "artifacts"
    for d in (seeds, work, art):
        d.mkdir()
    for i, script in enumerate([bytes(8), bytes([201, 0] * 4), bytes([0, 204] * 4)]):
        (seeds / f"s{i}").write_bytes(script + _seed("safetensors"))
    cmd = [
        sys.executable, os.path.join(FUZZ, "harness.py"), "safetensors", "--remote",
        "-runs=200", "-seed=15", "-timeout=20", "-rss_limit_mb=2048", "-max_len=65536",
        "-print_final_stats=1", f"-artifact_prefix={art}{os.sep}", str(work), str(seeds),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONHASHSEED": "0", "TMPDIR": str(tmp_path), "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(
        small_parent(cmd), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280
    )
    assert proc.returncode == 0 and not os.listdir(art), proc.stderr[-4000:]
    assert "Done 200 runs" in proc.stderr
    assert int(re.search(r"INITED cov: (\d+)", proc.stderr).group(1)) > 300
