"""`treetool inspect module:fn --args ...`: trace a function and show its jaxpr, by path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import Ahead

TESTS = Path(__file__).parents[1]

#: target and --args of each bad trace -> the start of its one error line (exit 2)
BAD = {
    ("cli_targets:scaled", "q7[3]", "2"): "treetool: error: --args q7[3]: unknown dtype 'q7'",
    ("cli_targets:scaled", "f32[3]"): (
        "treetool: error: cli_targets:scaled: tracing it with 1 argument(s) failed: TypeError: "
    ),
    ("cli_targets:scaled", "f32[3]", "not python"): (
        "treetool: error: --args not python: expected an array spec like f32[8,4]"
    ),
    ("cli_targets:TABLE", "f32[3]"): (
        "treetool: error: cli_targets:TABLE: --args needs module:function naming a function"
    ),
}

#: each test's runs, started side by side when the module's first test asks
run = Ahead(
    TESTS,
    {
        "test_inspect_traces_a_function_on_a_model_and_array_specs": [
            ("inspect", "cli_targets:mlp_loss", "--args", "cli_targets:mlp", "f32[5,3]", "f32[5,2]")
        ],
        "test_inspect_trace_json_has_paths_static_literals_and_dtypes": [
            ("inspect", "cli_targets:scaled", "--args", "bf16[3]", "2", "--json")
        ],
        "test_inspect_trace_errors_are_one_line": [
            ("inspect", target, "--args", *args) for target, *args in BAD
        ],
    },
)


@pytest.fixture(scope="module", autouse=True)
def _ahead(request: pytest.FixtureRequest) -> None:
    run.start(request)


def test_inspect_traces_a_function_on_a_model_and_array_specs():
    out = run(
        "inspect", "cli_targets:mlp_loss", "--args", "cli_targets:mlp", "f32[5,3]", "f32[5,2]"
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "jaxpr mlp_loss: 6 inputs → 1 output, 15 equations"
    assert lines[1:8] == [
        "inputs",
        "  a  f32[4,3]  .args[0].layers[0].weight",
        "  b  f32[4]  .args[0].layers[0].bias",
        "  c  f32[2,4]  .args[0].layers[1].weight",
        "  d  f32[2]  .args[0].layers[1].bias",
        "  e  f32[5,3]  .args[1]",
        "  f  f32[5,2]  .args[2]",
    ]
    assert "  .args[0].activation  <custom_jvp relu>" in lines


def test_inspect_trace_json_has_paths_static_literals_and_dtypes():
    out = run("inspect", "cli_targets:scaled", "--args", "bf16[3]", "2", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["name"] == "scaled"
    assert doc["inputs"] == [{"var": "a", "type": "bf16[3]", "path": ".args[0]"}]
    assert doc["static"] == [{"path": ".args[1]", "value": "2"}]
    assert doc["counts"] == {"mul": 1}


def test_inspect_trace_errors_are_one_line():
    for (target, *args), message in BAD.items():
        out = run("inspect", target, "--args", *args)
        assert out.returncode == 2, (target, args, out.stdout)
        assert out.stderr.startswith(message), out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
