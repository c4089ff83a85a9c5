"""What a `treetool` command imports before and while it reads: only what its path needs.

Start-up is paid by every command, so it is pinned by the modules imported rather than by
time: each command runs as the console script does (`treetool.cli` as `__main__`, ending in
`os._exit`) in a subprocess that writes `sys.modules` at exit, and the test checks that none
of the modules taken off that command's path came back (each cost 0.5-3 ms: argparse's
`shutil`, `importlib.abc` and its `tempfile`/`random`, the pickle machinery, the other
subcommands' code, the readers for `--help`). The files are written by the real libraries.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

# Runs `treetool ARGS` as the console script does; at exit (os._exit, sys.exit or the end of
# the module), one stderr line `MODULES name name ...` lists what was imported.
_REPORT = """
import os, runpy, sys
_exit = os._exit
def _report():
    sys.stderr.write("\\nMODULES " + " ".join(sorted(sys.modules)) + "\\n")
    sys.stderr.flush()
def _report_exit(code):
    _report()
    _exit(code)
os._exit = _report_exit
sys.argv = ["treetool", *sys.argv[1:]]
try:
    runpy.run_module("treetool.cli", run_name="__main__")
except SystemExit:
    _report()
    raise
"""

#: never on the path of reading a file's structure (each was on it before, or would be costly)
_NEVER_FOR_LS = {
    "shutil",  # argparse's terminal width (cli._Formatter finds it without)
    "importlib.abc",  # the jax import hook's base class (it needs none)
    "importlib.resources",
    "tempfile",
    "random",
    "difflib",  # only for a "did you mean" suggestion
    "treetool.io._pickle._numpy_rebuild",  # the pickle machinery: the listing flag is in io._listing
    "treetool.io.pickle",
    "treetool._summary._summary",
    "treetool._diff._tree_diff",
    "treetool._display",
    "rich",
    "numpy",
    "jax",
    "textual",
    "concurrent.futures",  # the remote reads' thread pool: local files need none
    "logging",
    "tensorstore",
}

#: `treetool --help` prints the parser: no reader, no model, no command code
_NEVER_FOR_HELP = _NEVER_FOR_LS | {
    "treetool.io",
    "treetool._paths._path",
    "treetool._tree._model",
    "treetool._cli._commands",
    "dataclasses",
    "inspect",
    "json",
}


def _run(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    r = subprocess.run(
        [sys.executable, "-c", _REPORT, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("MODULES ")]
    assert lines, r.stderr
    return r, set(lines[-1].split()[1:])


#: packages none of whose modules may be imported where they are in a `never` set
_PACKAGES = {"rich", "numpy", "jax", "textual", "tensorstore"}


def _imported(modules: set[str], never: set[str]) -> list[str]:
    """The modules of `never` (or, for a package in `_PACKAGES`, its submodules) imported."""
    return sorted(m for m in modules if m in never or m.split(".")[0] in never & _PACKAGES)


#: what `ls` prints of the files below, for safetensors and npz alike
_ROWS = [
    ["['head.w']", "[3, 2]", "int8"],
    ["['layer0.b']", "[3]", "float16"],
    ["['layer0.w']", "[4, 3]", "float32"],
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from safetensors.numpy import save_file

    d = tmp_path_factory.mktemp("startup")
    arrays = {
        "layer0.w": np.ones((4, 3), np.float32),
        "layer0.b": np.zeros((3,), np.float16),
        "head.w": np.ones((3, 2), np.int8),
    }
    save_file(arrays, str(d / "small.safetensors"))
    np.savez(d / "small.npz", **arrays)
    return d


def test_help_imports_no_reader_and_no_command(files: Path) -> None:
    r, modules = _run("--help", cwd=files)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: treetool [-h] [--debug] [--version] COMMAND ...")
    for name in ("inspect", "ls", "get", "summary", "diff", "demo"):
        assert f"\n    {name} " in r.stdout
    assert {"argparse", "treetool._cli._targets"} <= modules  # it did run (cli is `__main__`)
    assert _imported(modules, _NEVER_FOR_HELP) == []


@pytest.mark.parametrize("command", ["inspect", "ls", "get", "summary", "diff", "demo"])
def test_a_subcommand_help_imports_no_command_code(files: Path, command: str) -> None:
    r, modules = _run(command, "--help", cwd=files)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"usage: treetool {command} [-h]")
    assert _imported(modules, _NEVER_FOR_HELP) == []


@pytest.mark.parametrize("json", [False, True])
def test_ls_of_safetensors_imports_only_its_reader(files: Path, json: bool) -> None:
    r, modules = _run("ls", *(["--json"] if json else []), "small.safetensors", cwd=files)
    assert r.returncode == 0, r.stderr
    if json:
        import json as json_module

        data = json_module.loads(r.stdout)
        assert data["format"] == "safetensors" and data["totals"]["leaves"] == 3
        got = [[x["path"], str(x["shape"]), x["dtype"]] for x in data["leaves"]]
        assert got == _ROWS
    else:
        assert [line.split("\t") for line in r.stdout.splitlines()] == _ROWS
    assert "treetool.io.safetensors" in modules
    assert _imported(modules, _NEVER_FOR_LS) == []
    # no other format's reader either
    readers = {m for m in modules if m.startswith("treetool.io.") and not m[12:].startswith("_")}
    assert readers == {"treetool.io.safetensors"}


def test_ls_of_npz_imports_no_tempfile(files: Path) -> None:
    r, modules = _run("ls", "small.npz", cwd=files)
    assert r.returncode == 0, r.stderr
    assert [line.split("\t") for line in r.stdout.splitlines()] == _ROWS
    assert "treetool.io.npz" in modules
    # zipfile itself imports shutil: only the modules the npz path does not need here
    assert _imported(modules, _NEVER_FOR_LS - {"shutil"}) == []


def test_ls_of_an_unknown_command_still_lists_every_choice(files: Path) -> None:
    # only the named subcommand's arguments are built; an unknown one still gets the full error
    r, _ = _run("lss", "small.safetensors", cwd=files)
    assert r.returncode == 2
    assert (
        "argument COMMAND: invalid choice: 'lss' (choose from 'inspect', 'ls', 'get', "
        "'summary', 'diff', 'port', 'demo')" in r.stderr
    )


def test_port_help_imports_neither_jax_nor_the_port_machinery(files: Path) -> None:
    r, modules = _run("port", "--help", cwd=files)
    assert r.returncode == 0, r.stderr
    assert "--rules FILE" in r.stdout and "--check MODULE:FN" in r.stdout
    assert _imported(modules, _NEVER_FOR_HELP) == []
    assert [m for m in modules if m.startswith("treetool._port")] == []


def test_import_treetool_io_imports_no_detection_and_no_tree_model(tmp_path: Path) -> None:
    """`import treetool.io` (and `treetool.load`'s start) imports neither the table of
    formats nor the tree model: a remote `read` imports them once its first GET is on its
    way (`treetool/io/_sources/_early.py`); each name is still there on first use."""
    code = (
        "import sys, treetool.io as io\n"
        "before = sorted(sys.modules)\n"
        "print(' '.join(before))\n"
        "print(io.FORMATS['pickle'], io.detect.__name__, io.Opaque.__name__, io.Loaded.__name__)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()
    modules = set(first.split())
    heavy = {
        "treetool.io._formats",
        "treetool.io._detect",
        "treetool.io._opaque",
        "treetool._tree._model",
        "dataclasses",
        "inspect",
        "concurrent.futures",
        "logging",
    }
    assert sorted(heavy & modules) == []
    assert second == "treetool.io.pickle detect Opaque Loaded"


def test_treetool_io_formats_after_the_table_module_is_imported(tmp_path: Path) -> None:
    """`treetool.io.FORMATS` on first use, also once `treetool.io._formats` (the submodule,
    an attribute of the package from then on) was imported first."""
    code = "import treetool.io._formats, treetool.io as io\nprint(io.FORMATS['npz'])\n"
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "treetool.io.npz"
