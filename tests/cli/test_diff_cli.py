"""`treetool diff A B`, run as a real subprocess on module:attr equinox models."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from cli_runner import Ahead

TESTS = Path(__file__).parents[1]

#: each test's runs, started side by side when the module's first test asks
AHEAD = Ahead(
    TESTS,
    {
        "test_different_models_print_the_review_and_exit_1": [
            ("diff", "diff_targets:mlp", "diff_targets:mlp_wide")
        ],
        "test_json_reports_the_value_change_with_its_index_and_exit_1": [
            ("diff", "diff_targets:mlp", "diff_targets:mlp_perturbed", "--json")
        ],
        "test_a_tolerance_makes_the_models_equal_exit_0": [
            ("diff", "diff_targets:mlp", "diff_targets:mlp_perturbed", "--atol", "1e-2")
        ],
        "test_a_bad_target_is_one_line_on_stderr_and_exit_2": [
            ("diff", "diff_targets:mlp_wdie", "diff_targets:mlp"),
            ("diff", "diff_targets:mlp", "diff_targets:mlp", "--atol", "-1"),
        ],
    },
)


@pytest.fixture(scope="module", autouse=True)
def _ahead(request: pytest.FixtureRequest) -> None:
    AHEAD.start(request)


def run(*args: str) -> subprocess.CompletedProcess:
    """`treetool diff ARGS` in tests/: the run started ahead where there is one."""
    return AHEAD("diff", *args)


def test_different_models_print_the_review_and_exit_1():
    out = run("diff_targets:mlp", "diff_targets:mlp_wide")
    assert (out.returncode, out.stderr) == (1, "")
    assert out.stdout == textwrap.dedent(
        """\
        3 changes  ~3 changed (1 static, 2 shape)
        MLP
        ├── .layers  tuple[3]
        │   ├── ~ [1]  static  out_features: 8 → 16
        │   │   ├── ~ .weight  shape  f32[8,8] → f32[16,8]
        │   │   └── ~ .bias  shape  f32[8] → f32[16]
        │   └── · 2 unchanged
        └── · 2 unchanged
        """
    )


def test_json_reports_the_value_change_with_its_index_and_exit_1():
    out = run("diff_targets:mlp", "diff_targets:mlp_perturbed", "--json")
    assert out.returncode == 1, out.stderr
    data = json.loads(out.stdout)
    assert data["equal"] is False
    assert data["counts"] == {"added": 0, "removed": 0, "changed": 1}
    assert data["options"] == {"rtol": 0.0, "atol": 0.0, "values": True, "strict_types": False}
    (change,) = data["changes"]
    assert (change["path"], change["kind"]) == (".layers[2].bias", "value")
    assert change["detail"]["first_index"] == [1]
    assert change["detail"]["count"] == 1
    assert abs(change["detail"]["max_abs"] - 1e-3) < 1e-6


def test_a_tolerance_makes_the_models_equal_exit_0():
    out = run("diff_targets:mlp", "diff_targets:mlp_perturbed", "--atol", "1e-2")
    assert (out.returncode, out.stdout, out.stderr) == (0, "no differences\n", "")


def test_a_bad_target_is_one_line_on_stderr_and_exit_2():
    out = run("diff_targets:mlp_wdie", "diff_targets:mlp")
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr == (
        "treetool: error: diff_targets:mlp_wdie: diff_targets has no attribute 'mlp_wdie'; "
        "did you mean 'mlp_wide'?\n"
    )
    out = run("diff_targets:mlp", "diff_targets:mlp", "--atol", "-1")
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == "treetool: error: --rtol and --atol must be >= 0, got 0 and -1\n"
