"""PyTorch checkpoints read without torch: the zip and legacy formats, torch's reconstructors
on treetool's safe pickle machine, the weights_only report (re-exports only)."""

from ._archive import TorchRead, is_torch_zip, read_archive, zip_root
from ._legacy import MAGIC, PREFIX, read_legacy
from ._rebuild import TensorMaker, TorchStorage
from ._view import StridedArray
from ._weights_only import ALLOWED, WeightsOnly, describe, summary_line, verdict
from ._zip import Record, ZipDir, read_zip_dir

__all__ = [
    "ALLOWED",
    "MAGIC",
    "PREFIX",
    "Record",
    "StridedArray",
    "TensorMaker",
    "TorchRead",
    "TorchStorage",
    "WeightsOnly",
    "ZipDir",
    "describe",
    "is_torch_zip",
    "read_archive",
    "read_legacy",
    "read_zip_dir",
    "summary_line",
    "verdict",
    "zip_root",
]
