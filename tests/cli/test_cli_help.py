"""Every subcommand's `--help` says what it does and shows an example, and every argument
(positional or option) has help text: read from the real `--help` output of a subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from treetool.cli import _COMMANDS

# one process prints every subcommand's --help, each after a marker line; then whether
# printing them imported jax or textual (`treetool --help` must not)
_SCRIPT = """
import sys
from treetool.cli import main, _COMMANDS
for name in _COMMANDS:
    print("=== " + name, flush=True)
    try:
        main([name, "--help"])
    except SystemExit:
        pass
sys.stdout.flush()
print("=== imported", "jax" in sys.modules, "textual" in sys.modules)
"""


def _entries(text: str) -> dict[str, str]:
    """The arguments of one `--help` text: invocation (`--rtol R`, `TARGET`) -> its help."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    in_args = False
    current: str | None = None
    for line in lines:
        if line in ("positional arguments:", "options:"):
            in_args, current = True, None
            continue
        if not in_args:
            continue
        if not line.strip():  # the end of a section
            current = None
            continue
        if not line.startswith(" "):  # the epilog (`Examples:`): no more arguments
            in_args, current = False, None
            continue
        m = re.match(r"^  (\S(?:\S| (?! ))*)(?:\s{2,}(.*))?$", line)
        if m and not line.startswith("   "):  # a new argument, at two spaces in
            current = m.group(1)
            out[current] = (m.group(2) or "").strip()
        elif current is not None:  # its help, continued (or started) on the next line
            out[current] = (out[current] + " " + line.strip()).strip()
    return out


@pytest.mark.slow
def test_every_subcommand_help_has_a_description_an_example_and_help_for_each_argument():
    env = {**os.environ, "COLUMNS": "100"}
    run = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=120, env=env
    )
    assert run.returncode == 0 and run.stderr == "", run.stderr
    printed, imported = run.stdout.rsplit("=== imported ", 1)
    assert imported == "False False\n"  # neither jax nor textual
    parts = re.split(r"^=== (\S+)\n", printed, flags=re.M)
    helps = dict(zip(parts[1::2], parts[2::2]))
    assert sorted(helps) == sorted(_COMMANDS)
    assert sorted(_COMMANDS) == ["demo", "diff", "get", "inspect", "ls", "port", "summary"]
    for name, text in helps.items():
        lines = text.splitlines()
        assert lines[0].startswith(f"usage: treetool {name} "), (name, lines[0])
        # the description: the first paragraph after the usage, one sentence at least
        first = text.split("\n\n")[1]
        assert first[0].isupper() and first.rstrip().endswith("."), (name, first)
        example = [i for i, line in enumerate(lines) if re.match(r"^Examples?:$", line)]
        assert len(example) == 1, name
        commands = lines[example[0] + 1 :]
        assert commands and all(c.startswith(f"  treetool {name} ") for c in commands if c), (
            name,
            commands,
        )
        entries = _entries(text)
        assert "-h, --help" in entries, name
        missing = [arg for arg, help_text in entries.items() if not help_text]
        assert missing == [], (name, missing)
    diff = _entries(helps["diff"])
    assert {"A", "B", "--rtol R", "--atol A", "--values, --no-values", "--json"} <= set(diff)
    assert diff["--rtol R"].startswith("relative tolerance of the value comparison")
    assert diff["--atol A"].startswith("absolute tolerance of the value comparison")
    # every argument the reader found (the options shared by commands grow: not the exact list)
    assert set(_entries(helps["get"])) >= {
        "TARGET",
        "PATH",
        "-h, --help",
        "--stats",
        "--trust",
        "--partial",
        "--allow-fill",
        "--json",
        "--step STEP",
        "--like MODULE:ATTR",
        "--timeout SECONDS",
        "--retries N",
        "--follow-redirects",
    }


def test_the_help_reader_sees_an_argument_without_help():
    text = (
        "usage: treetool x [-h] [--rtol RTOL] A\n\npositional arguments:\n  A\n\noptions:\n"
        "  -h, --help   show this help message and exit\n  --rtol RTOL\n"
        "  --values, --no-values\n                compare values\n"
    )
    assert _entries(text) == {
        "A": "",
        "-h, --help": "show this help message and exit",
        "--rtol RTOL": "",
        "--values, --no-values": "compare values",
    }
