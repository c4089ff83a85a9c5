"""Widgets of the treetool app."""

from .details import DetailsPane
from .diff_tab import DiffTab
from .leaves_table import LeavesTable
from .search_bar import SearchBar
from .totals import TotalsBar
from .tree_view import PytreeTree

__all__ = ["DetailsPane", "DiffTab", "LeavesTable", "PytreeTree", "SearchBar", "TotalsBar"]
