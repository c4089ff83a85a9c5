"""`import treetool` pulls in neither jax nor textual; `treetool --help` neither jax nor textual."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("jax", "jaxlib", "textual", "equinox", "numpy")


def _modules_after(code: str) -> set[str]:
    probe = code + "\nimport sys\nprint('MODULES', *sorted({m.split('.')[0] for m in sys.modules}))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return set(out.stdout.splitlines()[-1].split()[1:])


def test_import_treetool_is_light():
    loaded = _modules_after("import treetool")
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


def test_help_imports_no_jax_or_textual():
    code = "from treetool.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    loaded = _modules_after(code)
    assert not loaded & {"jax", "jaxlib", "textual", "equinox"}


def test_import_emits_no_warnings():
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", "import treetool, treetool.cli"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and out.stderr == "" and out.stdout == ""
