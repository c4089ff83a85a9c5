"""PyTorch checkpoints read without torch: the zip and legacy formats, torch's reconstructors
on treetool's safe pickle machine, the weights_only report (re-exports only).

Names are imported from their modules on first use (PEP 562), so that detection, which needs
only `_sniff` and `_zip`, does not import the pickle machinery.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "TorchRead": "_archive",
    "read_archive": "_archive",
    "read_legacy": "_legacy",
    "MAGIC": "_sniff",
    "PREFIX": "_sniff",
    "is_torch_zip": "_sniff",
    "zip_root": "_sniff",
    "TensorMaker": "_rebuild",
    "TorchStorage": "_rebuild",
    "StridedArray": "_view",
    "ALLOWED": "_weights_only",
    "WeightsOnly": "_weights_only",
    "describe": "_weights_only",
    "fact_lines": "_weights_only",
    "verdict": "_weights_only",
    "Record": "_zip",
    "RecordSource": "_record_io",
    "ZipDir": "_zip",
    "read_zip_dir": "_zip",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
