"""Hostile functions and PRNG keys in pickles: named safely, never run, never a crash."""

from __future__ import annotations

import subprocess
import sys

import cloudpickle
import pytest
from harness import assert_contained, run_cli

# When an earlier test in the session has started jax, the harness's fork makes jax warn; the
# child execs python at once, so the warning does not apply here.
pytestmark = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")


def _jvp(inner: bytes, qualname: bytes) -> bytes:
    # custom_jvp instance: NEWOBJ of the class, then BUILD with {"__qualname__", "__wrapped__"}
    return (
        b"cjax._src.custom_derivatives\ncustom_jvp\n)\x81}("
        + b"\x8c\x0c__qualname__\x8c"
        + bytes([len(qualname)])
        + qualname
        + b"\x8c\x0b__wrapped__"
        + inner
        + b"ub"
    )


def test_deep_chain_of_wrapped_functions_is_one_leaf(tmp_path):
    body = b"N"
    for _ in range(400):  # 800 levels of containers: under the reader's depth limit
        body = _jvp(body, b"f\x1b[2J")
    (tmp_path / "deep.pkl").write_bytes(b"\x80\x04" + body + b".")
    run = run_cli("ls", "deep.pkl", cwd=tmp_path)
    assert_contained(run, rc=0, ls_fields=True)
    assert run.stdout == "\t-\t<custom_jvp f\\x1b[2J>\n"


def test_function_names_with_control_and_bidi_characters(tmp_path):
    def f(x):
        return x

    code = f.__code__.replace(co_name="n\x1b]0;pwn\x07", co_qualname="q\u202e\x1b[31m")
    evil = type(f)(code, {"__name__": "m\r\x1b[1A"}, "e")
    (tmp_path / "names.pkl").write_bytes(cloudpickle.dumps({"f": evil, "g": [evil]}))
    for args in (("ls", "names.pkl"), ("ls", "--json", "names.pkl"), ("summary", "names.pkl")):
        run = run_cli(*args, cwd=tmp_path)
        assert_contained(run, rc=0, ls_fields=args == ("ls", "names.pkl"))
    run = run_cli("ls", "names.pkl", cwd=tmp_path)
    assert run.stdout.splitlines()[0] == "['f']\t-\t<function m\\r\\x1b[1A.q\\u202e\\x1b[31m>"


def test_forged_keys_stay_inert(tmp_path):
    # made in a child: jax initialised in this process would make the harness's fork unsafe
    make = "import jax, pickle, sys; sys.stdout.buffer.write(pickle.dumps({'k': jax.random.split(jax.random.key(0), 4)}, protocol=4))"
    data = subprocess.run(
        [sys.executable, "-c", make], capture_output=True, check=True, timeout=120
    ).stdout
    # a tag with escape codes, and key data that does not end with the key shape
    bad_tag = data.replace(b"\x8c\x03fry", b"\x8c\x03\x1b[m")
    bad_shape = data.replace(b"K\x04K\x02\x86", b"K\x08K\x01\x86")
    assert bad_tag != data and bad_shape != data
    (tmp_path / "tag.pkl").write_bytes(bad_tag)
    (tmp_path / "shape.pkl").write_bytes(bad_shape)
    run = run_cli("ls", "tag.pkl", cwd=tmp_path)
    assert_contained(run, rc=0, ls_fields=True)
    assert run.stdout == "['k']\t[4]\tkey<fry>\n"  # the impl's name gives the dtype
    run = run_cli("ls", "shape.pkl", cwd=tmp_path)
    assert_contained(run, rc=0, ls_fields=True)
    assert "key<" not in run.stdout  # not a key: the placeholder shows what the file holds
