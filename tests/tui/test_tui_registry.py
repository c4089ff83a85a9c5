"""The TUI's tab registry and its modules' examples, without Textual's event loop."""

from __future__ import annotations

import doctest
import importlib

import pytest
from treetool.tui.tabs import TabSpec


def test_tab_spec_rejects_bad_and_reserved_ids():
    with pytest.raises(ValueError, match="not a valid Textual id"):
        TabSpec("2 words", "x", bool, bool)
    with pytest.raises(ValueError, match="reserved for a built-in tab"):
        TabSpec("leaves", "x", bool, bool)


@pytest.mark.parametrize(
    "module",
    [
        "treetool.tui",
        "treetool.tui.app",
        "treetool.tui.tabs",
        "treetool.tui._gc",
        "treetool.tui.widgets.histogram",
        "treetool.tui.widgets.details",
        "treetool.tui.widgets.totals",
        "treetool.tui.screens.help",
    ],
)
def test_docstring_examples(module):
    mod = importlib.import_module(module)
    result = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.failed == 0
