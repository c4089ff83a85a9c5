"""Widgets of the treetool app."""

from .details import DetailsPane
from .leaves_table import LeavesTable
from .search_bar import SearchBar
from .totals import TotalsBar
from .tree_view import PytreeTree

__all__ = ["DetailsPane", "LeavesTable", "PytreeTree", "SearchBar", "TotalsBar"]
