"""A griffe extension for the API reference: treetool's docstrings title their doctests
`Example:` (Google style's singular), which griffe reads as an admonition of Markdown text;
this reads them as the `Examples:` section, so the `>>>` lines render as code."""

from __future__ import annotations

import re
from typing import Any

import griffe

_TITLE = re.compile(r"^(\s*)Example:\s*$", re.M)


class ExamplesSection(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _TITLE.sub(r"\1Examples:", obj.docstring.value)
