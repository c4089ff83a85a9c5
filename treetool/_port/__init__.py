"""Porting weights between frameworks: `tt.port` and its `Plan`."""

from ._plan import Check as Check
from ._plan import Plan as Plan
from ._plan import PortError as PortError
from ._plan import port as port

__all__ = ["Check", "Plan", "PortError", "port"]
