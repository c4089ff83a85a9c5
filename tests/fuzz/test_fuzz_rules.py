"""The rule-file fuzz harness (`fuzz/rules.py`): its seeds replay without a finding, its
doctests hold, and a short seeded atheris run over `treetool/_port/_rules.py` finds nothing."""

from __future__ import annotations

import doctest
import importlib.util
import os
import subprocess
import sys
import types

import pytest
from cli_runner import small_parent

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FUZZ = os.path.join(ROOT, "fuzz")
RULES = os.path.join(FUZZ, "rules.py")
SEEDS = os.path.join(FUZZ, "corpus", "rules")


def _module() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("fuzz_rules", RULES)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rules_harness_doctests():
    result = doctest.testmod(_module())
    assert result.failed == 0 and result.attempted >= 4


def test_seeds_replay_without_a_finding():
    h = _module().RulesHarness()
    try:
        said = {}
        for n in sorted(os.listdir(SEEDS)):
            with open(os.path.join(SEEDS, n), "rb") as fh:
                said[n] = h.one(fh.read())
    finally:
        h.close()
    assert said == {
        "deep.rules": 'PortError: rules.txt: line 1: expected a quoted name ("layers.0.weight")',
        "plan.rules": "ok: 5 rows",
        "steps.rules": "PortError: rules.txt: ['qkv']: reshape(6,2) cannot reshape [2, 2]: sizes differ",
    }


def test_a_finding_is_reported(tmp_path):
    """The harness is not blind: an input that breaks the parser's promise is a finding."""
    h = _module().RulesHarness()
    try:
        h.tt = types.SimpleNamespace(port=_raise_recursion, TreetoolError=h.tt.TreetoolError)
        with pytest.raises(RecursionError):
            h.one(b"[")
    finally:
        h.close()


def _raise_recursion(*args, **kwargs):
    raise RecursionError("maximum recursion depth exceeded")


@pytest.mark.timeout(300)
def test_bounded_seeded_run_finds_nothing(tmp_path):
    work, art = tmp_path / "work", tmp_path / "artifacts"
    work.mkdir()
    art.mkdir()
    cmd = [
        sys.executable,
        RULES,
        "-runs=2000",
        "-seed=1",
        "-timeout=20",
        "-print_final_stats=1",
        f"-artifact_prefix={art}{os.sep}",
        str(work),
        SEEDS,
    ]
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    r = subprocess.run(
        small_parent(cmd), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "stat::number_of_executed_units: 2000" in r.stderr
    assert os.listdir(art) == []
    assert len([n for n in os.listdir(tmp_path) if n.startswith("treetool-fuzz-rules-")]) == 1
