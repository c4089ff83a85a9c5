"""Every script in examples/ runs, as a user would run it, and prints what it promises."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import together

EXAMPLES = Path(__file__).parents[2] / "examples"
SCRIPTS = sorted(EXAMPLES.glob("*.py"))

# lines each script must print (a script without an entry must still run cleanly)
EXPECTED = {
    "inspect_model.py": [
        "├── ['model']  MLP  450 params · 1.8 KB",
        ".layers[0].weight    f32[16,8]",
        "['.layers[0]', '.layers[1]', '.layers[2]']",
        "['.down', '.up'] 4.0",
        "Did you mean '.layers[1].weight'?",
    ],
    "transforms.py": [
        "{'cfg': {'loss': None, 'steps': None, 'table': 0}, 'x': 0, 'y': 0}",
        "  ? ['cfg']['table']  batched, but in ['cfg'] 2 leaf(s) are static",
        "{'cfg': None, 'x': 0, 'y': 0}",
        "per-example loss: (8,) float32",
        "hits 1, compiles 3",
        "  compiled: static value at args[2] changed: Config(scale=1.0, act='relu') -> Config(scale=1.0, act='tanh')",
        "  compiled: shape of args[1] changed: f32[8,3] -> f32[4,3]",
        ".layers[2].bias        key<fry>[]",
    ],
}


def _run(script: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.fixture(scope="module")
def runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Each selected script's run, each in its own empty folder, side by side (as many at once
    as there are cores) when the first script's test asks."""
    wanted = sorted(
        {
            item.callspec.params["script"]
            for item in request.session.items
            if item.path == request.path
            and getattr(item, "originalname", "") == "test_example_runs"
        }
    )
    calls = [functools.partial(_run, s, tmp_path_factory.mktemp(s.stem)) for s in wanted]
    return {s.name: out for s, out in zip(wanted, together(*calls))}


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_example_runs(script: Path, runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    out = runs[script.name]
    assert out.returncode == 0, out.stderr[-3000:]
    for line in EXPECTED.get(script.name, []):
        assert line in out.stdout, f"{script.name} did not print {line!r}"


def test_there_are_examples():
    assert "inspect_model.py" in [s.name for s in SCRIPTS]
