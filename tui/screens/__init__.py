"""Screens of the treetool app."""

from .help import HelpScreen

__all__ = ["HelpScreen"]
