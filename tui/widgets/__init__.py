"""Widgets of the treetool app."""

from treetool.tui.widgets.details import DetailsPane
from treetool.tui.widgets.diff_tab import DiffTab
from treetool.tui.widgets.leaves_table import LeavesTable
from treetool.tui.widgets.search_bar import SearchBar
from treetool.tui.widgets.totals import TotalsBar
from treetool.tui.widgets.tree_view import PytreeTree

__all__ = ["DetailsPane", "DiffTab", "LeavesTable", "PytreeTree", "SearchBar", "TotalsBar"]
