"""What the CLI says about the files it reads: steps (`@STEP`, `--step`), structure-less
files (`.eqx`), and the file's own facts (safetensors `__metadata__`, an orbax run's steps).

Below `_targets` (which reads the targets) and `_sides` (a diff's two sides).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from treetool._cli._target import CliError
from treetool._text import safe

__all__ = [
    "file_facts",
    "is_run_step",
    "load_eqx_like",
    "metadata_text",
    "note_positional",
    "note_steps",
    "print_facts",
    "target_spec",
]


def is_run_step(spec: str) -> bool:
    """`run@1200` naming a step of an existing path (a file gets the error that says why not)."""
    from treetool.io import split_step

    base, step = split_step(spec)
    return step is not None and os.path.exists(base)


def note_steps(spec: str, loaded: Any) -> None:
    steps = loaded.steps
    shown = ", ".join(map(str, steps[:12])) + (
        f", … ({len(steps)} in all)" if len(steps) > 12 else ""
    )
    word = "steps" if len(steps) != 1 else "step"
    name = safe(spec)  # a file name can hold escapes too
    print(
        f"treetool: note: {name}: an orbax run with {word} {shown}; showing step {loaded.step} "
        f"(pick one: {name}@{steps[0]} or --step {steps[0]})",
        file=sys.stderr,
    )


def file_facts(loaded: Any) -> dict[str, Any]:
    """`metadata` (safetensors `__metadata__`), `step`/`steps` (orbax runs) and a format's own
    facts of what `treetool.io.read` read (a `treetool.io.Loaded`); empty when it has none."""
    out: dict[str, Any] = {}
    if loaded.metadata is not None:
        out["metadata"] = loaded.metadata
    if loaded.steps:
        out["step"], out["steps"] = loaded.step, loaded.steps
    facts = getattr(loaded, "facts", None)
    if facts:
        out.update(facts)  # a format's own facts (`torch`: weights_only report, ties)
    return out


def print_facts(console: Any, facts: dict[str, Any]) -> None:
    """The file's metadata and step as header lines; file text goes out JSON-escaped."""
    from rich.text import Text

    if "metadata" in facts:
        console.print(Text("metadata: " + metadata_text(facts["metadata"])))
    if "steps" in facts:
        steps = facts["steps"]
        console.print(Text(f"step {facts['step']}; steps: {', '.join(map(str, steps))}"))
    if "torch" in facts:
        from treetool.io._torch import fact_lines

        for line in fact_lines(facts["torch"]):
            console.print(Text(line))


#: a metadata value whose JSON text is longer than this is shown cut, with its length
METADATA_VALUE_WIDTH = 80


def metadata_text(metadata: Any) -> str:
    """A file's metadata as one line of JSON (escaped: file text), each value longer than a
    line folded to `METADATA_VALUE_WIDTH` characters with its length (`--json` has them whole).

    Example:
        >>> print(metadata_text({"format": "pt", "paths": "x" * 10_000}))
        {"format": "pt", "paths": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx… (10,000 chars)}
    """
    import json

    from treetool._format import fold

    def one(value: Any) -> str:
        text = json.dumps(value, ensure_ascii=True, default=str)
        n = len(value) if isinstance(value, str) else None
        return fold(text, METADATA_VALUE_WIDTH, n)

    if not isinstance(metadata, dict):
        return one(metadata)
    items = (f"{json.dumps(str(k), ensure_ascii=True)}: {one(v)}" for k, v in metadata.items())
    return "{" + ", ".join(items) + "}"


def target_spec(args: argparse.Namespace, spec: str) -> str:
    """`spec`, with `@STEP` added when `--step` was given."""
    step = getattr(args, "step", None)
    if step is None:
        return spec
    from treetool.io import split_step

    if split_step(spec)[1] is not None:
        raise CliError(f"{spec}: give the step either as @STEP or with --step, not both")
    return f"{spec}@{step}"


def load_eqx_like(spec: str, like: Any) -> Any:
    """An equinox leaves file read into `like`'s structure (shapes may differ: diff shows them)."""
    from treetool.io.equinox import fill_like, read_records

    return fill_like(spec, like, read_records(spec), check_shapes=False)


def note_positional(spec: str) -> None:
    print(
        f"treetool: note: {safe(spec)}: an equinox tree_serialise_leaves file stores no structure, "
        "only its arrays in order: paths are positional ([0], [1], ...); pass --like "
        "module:attr (e.g. the function that builds the model) to read it into the model's paths",
        file=sys.stderr,
    )
