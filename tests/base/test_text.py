"""The one sanitiser: what it escapes, what it keeps, and that its output is always safe."""

from __future__ import annotations

import sys
import unicodedata

import pytest
from cli_runner import treetool
from hypothesis import given
from hypothesis import strategies as st

from treetool._errors import LoadError, PathError, StructureMismatch
from treetool._text import all_printable, safe, safe_text


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J", "\\x1b[2J"),  # CSI: clear the screen
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),  # OSC: window title, ended by BEL
        ("\x1b]8;;http://x\x1b\\", "\\x1b]8;;http://x\\x1b\\"),  # OSC 8 link
        ("\x1b]52;c;aGk=\x07", "\\x1b]52;c;aGk=\\x07"),  # OSC 52: write the clipboard
        ("a\nb\tc\rd", "a\\nb\\tc\\rd"),  # forged lines and columns
        ("\x00\x08\x7f", "\\x00\\x08\\x7f"),  # NUL, backspace, DEL
        ("\x85\x9b31m", "\\x85\\x9b31m"),  # C1: NEL, CSI
        ("\u202eabc\u202c", "\\u202eabc\\u202c"),  # bidi override / pop
        ("\u2066\u2067\u2068\u2069", "\\u2066\\u2067\\u2068\\u2069"),  # bidi isolates
        ("\u200e\u200f\u061c", "\\u200e\\u200f\\u061c"),  # bidi marks
        ("zero\u200bwidth\ufeff", "zero\\u200bwidth\\ufeff"),  # invisible format characters
        ("line\u2028sep\u2029", "line\\u2028sep\\u2029"),
        ("x\ud800y", "x\\ud800y"),  # a lone surrogate (from a bad file) becomes encodable
        ("\U000e0041", "\\U000e0041"),  # a tag character (format, invisible)
    ],
)
def test_control_escape_and_bidi_characters_are_shown_escaped(raw, shown):
    assert safe(raw) == shown
    assert safe_text(raw).plain == shown


@pytest.mark.parametrize(
    "text",
    [
        "layers[0].weight",
        "['params']['Dense_0']['kernel']",
        "[/]  [bold red]x  [@click=app.quit]",  # markup characters are text, not escaped
        "poids_été Ωμέγα 权重 🌳 ✓",
        "a\u00a0b\u3000c",  # no-break and ideographic spaces
        "",
    ],
)
def test_printable_text_is_unchanged(text):
    assert safe(text) == text


def test_newlines_kept_when_they_are_the_callers_own():
    assert safe("first\n  ['a\x1b']\nlast", newlines=True) == "first\n  ['a\\x1b']\nlast"
    assert safe("first\nlast") == "first\\nlast"


def test_the_escape_table_stays_small_on_hostile_input():
    from treetool._text import _TABLE

    safe("".join(chr(c) for c in range(0xE000, 0xF900)))  # 6,400 private-use characters
    assert len(_TABLE) <= 4096
    assert safe("\ue000") == "\\ue000"


def test_error_messages_are_sanitised():
    assert str(LoadError("f.pkl: bad key 'a\x1b[2J\nb'")) == "f.pkl: bad key 'a\\x1b[2J\\nb'"
    assert str(PathError("no path .a\nb")) == "no path .a\\nb"
    # a structure mismatch keeps its own line breaks, and escapes the rest
    msg = "Custom node type mismatch\n  at ['a\x1b']\nA has dict"
    assert str(StructureMismatch(msg)) == "Custom node type mismatch\n  at ['a\\x1b']\nA has dict"


def _unsafe(ch: str) -> bool:
    return unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp", "Co", "Cn")


@given(st.text(alphabet=st.characters(exclude_categories=()), max_size=40))
def test_output_never_holds_a_control_character_and_is_idempotent(text):
    out = safe(text)
    assert not [c for c in out if _unsafe(c)]
    assert safe(out) == out
    out.encode("utf-8")  # no lone surrogate left
    if not any(_unsafe(c) for c in text):
        assert out == text


_NAMES = st.text(alphabet=st.characters(exclude_categories=()), max_size=12)
_PLAIN = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=12)


@given(
    st.lists(st.one_of(_PLAIN, _NAMES), max_size=300),
    st.lists(_PLAIN, min_size=64, max_size=200),
)
def test_all_printable_says_what_isprintable_says_of_each(mixed, plain):
    # short lists (checked one by one), long ones (one vectorised check), and long ASCII lists
    # with one bad character anywhere, including the ASCII edges 0x1F and 0x7F; each with
    # numpy imported (its two passes) and as in a process that has not imported it
    # (`bytes.translate`)
    for numpy_imported in (True, False):
        numpy = None if numpy_imported else sys.modules.pop("numpy")
        try:
            for texts in (mixed, plain, [*plain, *mixed]):
                assert all_printable(texts) == all(t.isprintable() for t in texts)
            for bad in ("\x1f", "\x7f", "\x00", "\x1b[2J", "\u202e", "\x85"):
                for at in (0, len(plain) // 2, len(plain)):
                    texts = [*plain[:at], f"w{bad}", *plain[at:]]
                    assert all_printable(texts) is False
        finally:
            if numpy is not None:
                sys.modules["numpy"] = numpy


@pytest.mark.slow
def test_ls_escapes_one_hostile_path_among_thousands(tmp_path):
    # `treetool ls` checks a chunk of paths at once: one bad path in 5,000 is still escaped
    import pickle

    import numpy as np

    tree = {f"p{i}": np.zeros(1, np.float32) for i in range(5_000)}
    tree["evil\x1b]0;title\x07"] = np.zeros(2, np.float32)
    path = tmp_path / "t.pkl"
    path.write_bytes(pickle.dumps(tree))
    out = treetool("ls", str(path))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 5_001 and "\x1b" not in out.stdout
    assert "['evil\\x1b]0;title\\x07']\t[2]\tfloat32" in lines


@pytest.mark.slow
def test_the_sanitiser_sits_below_everything():
    """`_text` imports nothing of treetool and no rich: error lines and `--help` use it."""
    import ast
    import subprocess
    import sys
    from pathlib import Path

    import treetool._text as mod

    tree = ast.parse(Path(mod.__file__).read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = {a.name for n in top for a in n.names} | {
        n.module for n in top if isinstance(n, ast.ImportFrom) and n.module
    }
    assert names <= {"__future__", "annotations", "sys", "unicodedata", "typing", "Any"}
    code = "import sys, treetool._text as t; t.safe('a\\x1b'); print('rich' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "False\n"
