"""Porting weights between frameworks: `tt.port` and its `Plan`."""

from treetool._port._error import PortError as PortError
from treetool._port._plan import Check as Check
from treetool._port._plan import Plan as Plan
from treetool._port._plan import port as port

__all__ = ["Check", "Plan", "PortError", "port"]
