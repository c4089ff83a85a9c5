"""`PortError`: the one error of porting, below the plan, its rule files and its writers."""

from __future__ import annotations

from treetool._errors import TreetoolError

__all__ = ["PortError"]


class PortError(TreetoolError, ValueError):
    """A plan that cannot be applied (ambiguous or incomplete), or a rule that does not fit."""
