"""`pip install treetool` from a built wheel (not editable) works: the wheel is built from a copy
of the project's files, installed with no dependencies into a fresh venv that borrows this
environment's installed packages, and run from a folder where the source tree cannot be imported.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _run(*cmd: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=240
    )
    assert out.returncode == 0, f"{cmd}: exit {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("treetool", "tui"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    dist = tmp_path_factory.mktemp("dist")
    # the build backend of this environment (setuptools): no download needed
    _run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
        "-w", dist, src, cwd=src,
    )  # fmt: skip
    (whl,) = dist.glob("treetool-*.whl")
    return whl


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = tmp_path_factory.mktemp("venv")
    _run(sys.executable, "-m", "venv", "--without-pip", env, cwd=env)
    (site,) = env.glob("lib/python*/site-packages")
    # the dependencies come from this environment: a path entry, whose own .pth files (the
    # editable install of the source tree among them) are not processed
    (site / "zz_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run(
        sys.executable, "-m", "pip", "--python", env / "bin" / "python", "install",
        "--no-deps", "-q", wheel, cwd=env,
    )  # fmt: skip
    return env


def test_the_wheel_holds_the_packages_and_the_tui_stylesheet(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "treetool/__init__.py" in names
    assert "treetool/io/__init__.py" in names
    assert "treetool/tui/app.py" in names
    assert "treetool/tui/app.tcss" in names
    assert "treetool/tui/widgets/tree_view.py" in names
    # every package in the source tree is in the wheel (a package missing from pyproject's
    # explicit list would be silently left out)
    for init in [*(ROOT / "treetool").rglob("__init__.py"), *(ROOT / "tui").rglob("__init__.py")]:
        rel = init.relative_to(ROOT)
        inside = (Path("treetool/tui", *rel.parts[1:]) if rel.parts[0] == "tui" else rel).as_posix()
        assert inside in names, f"{inside} is not in the wheel"
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    assert "License-Expression: Apache-2.0" in text


def test_demo_runs_from_the_installed_wheel(venv: Path, tmp_path: Path) -> None:
    out = _run(venv / "bin" / "treetool", "demo", "--no-tui", cwd=tmp_path)
    assert "TinyTransformer" in out.stdout
    assert ".blocks" in out.stdout
    where = _run(
        venv / "bin" / "python", "-c", "import treetool; print(treetool.__file__)", cwd=tmp_path
    )
    assert where.stdout.strip().startswith(str(venv)), where.stdout


def test_the_installed_tui_finds_its_stylesheet(venv: Path, tmp_path: Path) -> None:
    code = (
        "import pathlib\n"
        "from treetool.tui.app import TreetoolApp\n"
        "css = pathlib.Path(TreetoolApp.CSS_PATH)\n"
        "print(css)\n"
        "print(css.is_file() and '#main' in css.read_text())\n"
    )
    out = _run(venv / "bin" / "python", "-c", code, cwd=tmp_path)
    path, ok = out.stdout.split()
    assert path.startswith(str(venv)), path
    assert ok == "True"
