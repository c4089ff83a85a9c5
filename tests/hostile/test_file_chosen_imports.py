"""A file never chooses an import, and names it makes of non-UTF-8 bytes reach `--json` intact.

A pickle naming classes of `chex` (a known library, whose layouts treetool knows how to read)
used to make a safe read import chex, and with it absl, unittest and jax.test_util (1.5 s):
layouts now come only from modules the program imported. A lone surrogate in a key (bytes
that are not UTF-8, kept by `surrogatepass`) used to crash `--json` with UnicodeEncodeError.
Every file is built here, in the test run.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from harness import assert_contained, run_cli

pytestmark = [
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

P4 = b"\x80\x04"


def _unicode(b: bytes) -> bytes:
    return b"\x8c" + bytes([len(b)]) + b


def _global(module: str, name: str) -> bytes:
    return _unicode(module.encode()) + _unicode(name.encode()) + b"\x93"


def _chex_pickle() -> bytes:
    """{"x": chex.ArrayTree-ish dataclass objects}: NEWOBJ of classes chex defines."""
    objs = b""
    for mod, name in (
        ("chex._src.dataclass", "Dataclass"),
        ("chex._src.fake", "FakeDevice"),
        ("chex", "ChexVariantTest"),
        ("jax.test_util", "JaxTestCase"),
    ):
        objs += _unicode(name.encode()) + _global(mod, name) + b")\x81" + b"}" + b"b"
    return P4 + b"}(" + objs + b"u."


_PROBE = """
import sys, time, treetool as tt
t = time.perf_counter()
tree = tt.load(sys.argv[1])
first = sorted(m for m in ("chex", "absl", "unittest", "jax") if m in sys.modules)
import jax  # flattening with jax asks each node's layout (jax itself imports unittest)
paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]
listed = [str(p) for p, _ in tt.leaves_with_path(tree)]
bad = sorted(m for m in ("chex", "absl", "jax.test_util") if m in sys.modules)
print(first, bad, len(tree), paths == listed)
"""


@pytest.mark.slow
def test_a_pickle_naming_chex_imports_nothing(tmp_path):
    f = tmp_path / "chex.pkl"
    f.write_bytes(_chex_pickle())
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(f)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "[] [] 4 True"
    run = run_cli("ls", "chex.pkl", cwd=tmp_path)
    assert_contained(run, rc=0, ls_fields=True)
    assert "not executed" in run.stderr


def _surrogate_key_pickle() -> bytes:
    # {"w\udc80x": 1, "ok": 2}: the key's bytes are a UTF-8-encoded lone surrogate
    return P4 + b"}(" + _unicode(b"w\xed\xb2\x80x") + b"K\x01" + _unicode(b"ok") + b"K\x02u."


@pytest.mark.slow
@pytest.mark.parametrize("cmd", [["ls", "--json"], ["inspect", "--json"], ["summary", "--json"]])
def test_json_of_a_lone_surrogate_key_is_valid_utf8_json(tmp_path, cmd):
    (tmp_path / "s.pkl").write_bytes(_surrogate_key_pickle())
    run = run_cli(*cmd, "s.pkl", cwd=tmp_path)
    assert_contained(run, rc=0)
    data = json.loads(run.stdout)
    strings: list[str] = []

    def collect(x) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                strings.append(k)
                collect(v)
        elif isinstance(x, list):
            for v in x:
                collect(v)
        elif isinstance(x, str):
            strings.append(x)

    collect(data)
    # the sanitiser shows the surrogate as its escape text, or the JSON writer escapes it
    assert any("w\\udc80x" in s or "w\udc80x" in s for s in strings), run.stdout


def test_print_json_escapes_lone_surrogates_on_a_strict_utf8_stream(monkeypatch):
    from treetool._cli._json import _print_json, _Records

    raw = io.BytesIO()
    strict = io.TextIOWrapper(raw, encoding="utf-8", errors="strict")
    monkeypatch.setattr(sys, "stdout", strict)
    _print_json({"name": "w\udc80x", "n": 1})
    records = _Records(['{"path": "[\'a\udcff\']"}'])
    _print_json({"format": "pickle", "leaves": records})
    strict.flush()
    out = raw.getvalue().decode("utf-8")
    first, second = out.split("}\n", 1)
    assert json.loads(first + "}") == {"name": "w\udc80x", "n": 1}
    assert json.loads(second)["leaves"] == [{"path": "['a\udcff']"}]
    assert "\\udcff" in second
