"""Screens of the treetool app."""

from treetool.tui.screens.help import HelpScreen

__all__ = ["HelpScreen"]
