"""mypy is clean on treetool/ and tui/, and a user's `import treetool as tt` sees real types.

`tui/` becomes the package `treetool.tui` only when installed (a setuptools package-dir
mapping that mypy cannot follow), so mypy runs on a view of the source: a `treetool/`
directory of symlinks to every entry of the real one, plus `tui` linked in as `treetool/tui`.
The view and mypy's cache live in the repository's `.mypy_cache/` (git-ignored), so a run
after the first only re-checks the modules that changed.
"""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

import treetool

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".mypy_cache"


def _source_view() -> Path:
    """`.mypy_cache/src/treetool`: the installed layout of treetool and treetool.tui, by links."""
    view = CACHE / "src" / "treetool"
    view.mkdir(parents=True, exist_ok=True)
    wanted = {p.name: p for p in (ROOT / "treetool").iterdir() if p.name != "__pycache__"}
    wanted["tui"] = ROOT / "tui"
    for entry in view.iterdir():  # drop links to modules that were renamed or removed
        if entry.name not in wanted or entry.resolve() != wanted[entry.name].resolve():
            entry.unlink()
    for name, target in wanted.items():
        if not (view / name).is_symlink():
            (view / name).symlink_to(target)
    return view.parent


def _mypy(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(CACHE / "cache"),
            "--no-color-output",
            "--no-error-summary",
            *args,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "MYPY_FORCE_COLOR": "0"},
    )


def test_mypy_is_clean_on_treetool_and_tui():
    src = _source_view()
    out = _mypy("treetool", cwd=src)
    # report the paths as they are in the repository: treetool/tui/x.py is tui/x.py
    report = (out.stdout + out.stderr).replace("treetool/tui/", "tui/")
    assert out.returncode == 0 and report.strip() == "", "mypy found errors:\n" + report


def test_the_source_view_covers_every_module():
    # the check above sees every .py file of treetool/ and tui/, under the installed names
    src = _source_view()
    seen = {
        (Path(d) / f).relative_to(src).as_posix()
        for d, _, files in os.walk(src / "treetool", followlinks=True)
        for f in files
        if f.endswith(".py")
    }
    real = {
        f"treetool/{p.relative_to(ROOT / 'treetool').as_posix()}"
        for p in (ROOT / "treetool").rglob("*.py")
    }
    real |= {
        f"treetool/tui/{p.relative_to(ROOT / 'tui').as_posix()}"
        for p in (ROOT / "tui").rglob("*.py")
    }
    assert seen == real
    assert "treetool/tui/app.py" in seen and "treetool/_paths.py" in seen


def _type_checking_imports() -> dict[str, str]:
    """name -> module of the `if TYPE_CHECKING:` imports in treetool/__init__.py."""
    tree = ast.parse((ROOT / "treetool" / "__init__.py").read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom), ast.unparse(imp)
                for alias in imp.names:
                    assert alias.asname == alias.name, f"re-export {alias.name} as itself"
                    assert imp.level == 1 and imp.module, ast.unparse(imp)
                    found[alias.name] = f"treetool.{imp.module}"
    return found


def test_type_checking_imports_match_the_lazy_table():
    static = _type_checking_imports()
    assert set(static) == set(treetool._LAZY)
    assert set(treetool.__all__) == set(static) | {
        "LoadError",
        "Path",
        "PathError",
        "SaveError",
        "SelectionError",
        "StructureMismatch",
        "TreetoolError",
        "UnsafeError",
    }
    # each name the type checker sees is the very object `tt.name` gives at run time
    for name, module in static.items():
        real, public = getattr(importlib.import_module(module), name), getattr(treetool, name)
        if name in ("render", "show") and isinstance(public, types.ModuleType):
            # importing treetool.render.x / treetool.show binds the module over the function
            # name; those two modules are callable and forward to their function
            assert public.__name__ == module and callable(public)
        else:
            assert public is real, name


USER_SCRIPT = """\
import treetool as tt

reveal_type(tt.load)
reveal_type(tt.view)
reveal_type(tt.Path.parse("a.b"))
tt.load(3.5)
tt.view({"a": 1}, is_leaf=1, nonsense=True)
tt.no_such_function()
"""


def test_a_user_script_sees_the_public_signatures(tmp_path):
    src = _source_view()
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT)
    out = _mypy("--follow-imports=silent", str(script), cwd=src)  # errors in user.py only
    lines = [line.split(": ", 1)[1] for line in out.stdout.splitlines() if ": " in line]
    text = "\n".join(lines)
    assert out.returncode == 1, out.stdout + out.stderr
    # the revealed types are the real signatures, not Any from a module __getattr__
    assert 'Revealed type is "def (path: str | os.PathLike[Any], *, trust: bool =' in text
    assert 'Revealed type is "def (tree: Any, is_leaf: ' in text
    assert ') -> treetool._model.Node"' in text
    assert 'Revealed type is "treetool._paths.Path"' in text
    # and wrong calls are errors, line by line
    errors = [line for line in out.stdout.splitlines() if ": error: " in line]
    by_line = {int(line.split(":")[1]) for line in errors}
    assert by_line == {6, 7, 8}, textwrap.indent(out.stdout, "  ")
    assert any('Argument 1 to "load" has incompatible type "float"' in e for e in errors)
    assert any('Unexpected keyword argument "nonsense" for "view"' in e for e in errors)
    assert any('Argument "is_leaf" to "view" has incompatible type "int"' in e for e in errors)
    assert any('Module has no attribute "no_such_function"' in e for e in errors)


@pytest.mark.parametrize("name", ["load", "view", "diff", "tree_at"])
def test_lazy_names_still_load_lazily(name):
    # the TYPE_CHECKING imports cost nothing at run time: `import treetool` loads no module
    # of the lazy table until a name is used
    code = (
        "import sys, treetool\n"
        f"assert 'treetool._model' not in sys.modules and 'treetool.io' not in sys.modules\n"
        f"f = treetool.{name}\n"
        f"assert callable(f) and f is getattr(sys.modules[f.__module__], '{name}')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
