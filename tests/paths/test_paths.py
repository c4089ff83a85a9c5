"""Path parsing, formatting, jax conversion and glob matching (no trees involved)."""

from __future__ import annotations

import re
import subprocess
import sys

import jax
import pytest
from hypothesis import given
from hypothesis import strategies as st

from treetool import Path, PathError
from treetool._paths._path import (
    AnyIndex,
    AnyKey,
    DeepWildcard,
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    NameGlob,
    SequenceKey,
)

jtu = jax.tree_util


@pytest.mark.parametrize(
    "keys",
    [
        (),
        (DictKey("params"), DictKey("Dense_0"), DictKey("kernel")),
        (GetAttrKey("layers"), SequenceKey(0), GetAttrKey("weight")),
        (DictKey(0), DictKey(1.5), DictKey(None), DictKey(True), DictKey((1, "a"))),
        (DictKey("a.b"), DictKey("it's"), DictKey('say "hi"'), DictKey("]["), DictKey("")),
        (FlattenedIndexKey(3), SequenceKey(12)),
    ],
)
def test_str_is_keystr_and_round_trips(keys):
    path = Path(keys)
    assert str(path) == jtu.keystr(path.to_jax())
    assert Path.parse(str(path)) == path
    assert Path.from_jax(path.to_jax()) == path
    assert [type(k).__name__ for k in path.to_jax()] == [type(k).__name__ for k in keys]


def test_parse_forms():
    assert Path.parse("layers[0].weight").keys == (
        GetAttrKey("layers"),
        SequenceKey(0),
        GetAttrKey("weight"),
    )
    assert Path.parse("['params']['w']").keys == (DictKey("params"), DictKey("w"))
    assert Path.parse("a.0.b").keys == (GetAttrKey("a"), GetAttrKey("0"), GetAttrKey("b"))
    assert Path.parse("**.bias").keys == (DeepWildcard(), GetAttrKey("bias"))
    assert Path.parse("layers[*].w").keys == (GetAttrKey("layers"), AnyIndex(), GetAttrKey("w"))
    assert Path.parse("*.lin*").keys == (AnyKey(), NameGlob("lin*"))
    assert Path.parse("") == Path() and str(Path()) == ""
    assert Path.parse("**.bias").is_pattern and not Path.parse(".a[0]").is_pattern


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a[0", "path 'a[0': '[' at position 1 is never closed"),
        ("a.", "path 'a.' ends with '.': expected a name after it"),
        ("a[foo]", "path 'a[foo]': [foo] at position 1 is not an index, a quoted key or [*]"),
        ("a]b", "path 'a]b': unexpected ']'"),
    ],
)
def test_parse_errors_are_pinned(text, message):
    with pytest.raises(PathError, match=re.escape(message)):
        Path.parse(text)


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("**.bias", ".layers[0].bias", True),
        ("**.bias", ".bias", True),
        ("**.bias", "['params']['Dense_0']['bias']", True),
        ("**.bias", ".layers[0].weight", False),
        ("layers[*].weight", ".layers[3].weight", True),
        ("layers[*].weight", ".layers.weight", False),
        ("*.weight", ".head.weight", True),
        ("*.weight", ".a.b.weight", False),
        ("**", ".a.b[0]", True),
        ("a.**.c", ".a.c", True),
        ("a.**.c", ".a.x[1].c", True),
        ("params.Dense_*.kernel", "['params']['Dense_1']['kernel']", True),
        ("params.Dense_*.kernel", "['params']['LayerNorm_0']['kernel']", False),
        ("layers.0.weight", ".layers[0].weight", True),
    ],
)
def test_glob_match(pattern, path, expected):
    assert Path.parse(pattern).match(Path.parse(path)) is expected


_key = st.one_of(
    st.builds(
        DictKey, st.one_of(st.text(max_size=6), st.integers(-5, 50), st.none(), st.booleans())
    ),
    st.builds(SequenceKey, st.integers(0, 100)),
    st.builds(GetAttrKey, st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)),
    st.builds(FlattenedIndexKey, st.integers(0, 9)),
)


@given(st.lists(_key, max_size=8))
def test_parse_of_str_is_identity(keys):
    path = Path(keys)
    text = str(path)
    assert text == jtu.keystr(path.to_jax())
    assert Path.parse(text) == path
    assert str(Path.parse(text)) == text


@pytest.mark.slow
def test_paths_module_does_not_import_jax():
    code = "import treetool._paths._path as p, sys; p.Path.parse(\"a['b'][0]\"); print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
