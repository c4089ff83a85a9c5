"""The installed distribution's version, read from its metadata: the one place it is written
is `pyproject.toml`."""

from __future__ import annotations

from functools import cache

__all__ = ["version"]


@cache
def version() -> str:
    """`treetool`'s version as installed (`importlib.metadata`); "unknown" when it is not.

    Example:
        >>> import treetool
        >>> version() == treetool.__version__
        True
    """
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("treetool")
    except PackageNotFoundError:
        return "unknown"
