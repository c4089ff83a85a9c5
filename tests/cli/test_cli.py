"""The `treetool` command, run as a real subprocess on live objects named module:attr."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_runner import Ahead, treetool

TESTS = Path(__file__).parents[1]

#: bad input -> its one error line (exit 2)
ERRORS = [
    (
        ("get", "cli_targets:small", "params.dense.kernl"),
        "treetool: error: cli_targets:small: no path '.params.dense.kernl' in the tree: "
        "['params']['dense'] has no .kernl; it has ['bias'], ['kernel']. "
        "Did you mean \"['params']['dense']['kernel']\"?",
    ),
    (
        ("inspect", "no_such_module:x"),
        "treetool: error: no_such_module:x: cannot import module 'no_such_module'",
    ),
    (
        ("inspect", "cli_targets:smal"),
        "treetool: error: cli_targets:smal: cli_targets has no attribute 'smal'; did you mean 'small'?",
    ),
    (
        ("inspect", "cli_targets:broken"),
        "treetool: error: cli_targets:broken: calling broken() failed: "
        "RuntimeError: the factory failed with a second line",
    ),
    (
        ("inspect", "missing.pkl"),
        "treetool: error: missing.pkl: no such file or directory (and not a module:attr object)",
    ),
    (
        ("ls", "cli_targets:small", "**.nothing"),
        "treetool: error: cli_targets:small: no leaf matches '**.nothing'",
    ),
]

#: each test's runs, started side by side when the module's first test asks
AHEAD = Ahead(
    TESTS,
    {
        "test_inspect_depth_and_filter": [  # first: it compiles what the other models need
            ("inspect", "cli_targets:mlp", "--no-tui", "--depth", "1"),
            ("inspect", "cli_targets:mlp", "--no-tui", "--filter", "**.bias"),
        ],
        "test_help_lists_the_commands": [("--help",)],
        "test_inspect_prints_a_tree_when_not_a_terminal": [("inspect", "cli_targets:small")],
        "test_inspect_json_schema": [
            ("inspect", "cli_targets:small", "--json"),
            ("ls", "cli_targets:small", "**.kernel", "--json"),
        ],
        "test_ls_one_leaf_per_line": [
            ("ls", "cli_targets:small"),
            ("ls", "cli_targets:small", "params.*.b*"),
        ],
        "test_get_shows_facts_stats_and_values": [
            ("get", "cli_targets:small", "params.dense.kernel"),
            ("get", "cli_targets:small", "['params']['dense']['kernel']", "--json"),
        ],
        "test_summary_table": [("summary", "cli_targets:mlp")],
        "test_errors_are_one_line_with_exit_code_2": [args for args, _ in ERRORS],
        "test_debug_shows_the_traceback": [("--debug", "inspect", "cli_targets:broken")],
        "test_demo_prints_the_model_and_its_optimizer_state": [("demo", "--no-tui")],
        "test_inspect_a_jaxpr_view_prints_its_equations_and_json": [
            ("inspect", "cli_targets:jaxpr_view", "--no-tui", "--depth", "1"),
            ("inspect", "cli_targets:jaxpr_view", "--json"),
        ],
    },
)


@pytest.fixture(scope="module", autouse=True)
def _ahead(request: pytest.FixtureRequest) -> None:
    AHEAD.start(request)


def run(*args: str, cwd: Path = TESTS) -> subprocess.CompletedProcess:
    """`treetool ARGS` in `cwd`: the run started ahead where there is one."""
    return AHEAD(*args) if cwd == TESTS else treetool(*args, cwd=cwd)


def test_help_lists_the_commands():
    out = run("--help")
    assert out.returncode == 0
    for cmd in ("inspect", "ls", "get", "summary", "diff", "demo"):
        assert cmd in out.stdout


def test_inspect_prints_a_tree_when_not_a_terminal():
    out = run("inspect", "cli_targets:small")
    assert out.returncode == 0, out.stderr
    assert out.stdout == textwrap.dedent(
        """\
        dict[3]  9 params · 36 B
        ├── ['name']  'tiny'
        ├── ['params']  dict[1]  9 params · 36 B
        │   └── ['dense']  dict[2]  9 params · 36 B
        │       ├── ['bias']  f32[3]  3 params · 12 B
        │       └── ['kernel']  f32[2,3]  6 params · 24 B
        └── ['step']  7
        """
    )
    assert out.stderr == ""


def test_inspect_depth_and_filter():
    out = run("inspect", "cli_targets:mlp", "--no-tui", "--depth", "1")
    assert out.stdout.splitlines() == [
        "MLP  26 params · 104 B",
        "├── .layers  tuple[2]  26 params · 104 B",
        "├── .activation  <custom_jvp relu>",
        "└── .final_activation  <function <lambda>>",
    ]
    out = run("inspect", "cli_targets:mlp", "--no-tui", "--filter", "**.bias")
    assert out.stdout.splitlines() == [
        ".layers[0].bias  f32[4]  4 params · 16 B",
        ".layers[1].bias  f32[2]  2 params · 8 B",
    ]


def test_inspect_json_schema():
    out = run("inspect", "cli_targets:small", "--json")
    data = json.loads(out.stdout)
    assert data["format"] == "python"
    assert data["totals"] == {"leaves": 4, "params": 9, "bytes": 36}
    assert data["leaves"][1] == {
        "path": "['params']['dense']['bias']",
        "shape": [3],
        "dtype": "float32",
        "nbytes": 12,
        "device": "host",
        "type": "ndarray",
    }
    assert [leaf["path"] for leaf in data["leaves"]] == [
        "['name']",
        "['params']['dense']['bias']",
        "['params']['dense']['kernel']",
        "['step']",
    ]
    filtered = json.loads(run("ls", "cli_targets:small", "**.kernel", "--json").stdout)
    assert [leaf["path"] for leaf in filtered["leaves"]] == ["['params']['dense']['kernel']"]


def test_ls_one_leaf_per_line():
    out = run("ls", "cli_targets:small")
    assert out.stdout.splitlines() == [
        "['name']\t-\t'tiny'",
        "['params']['dense']['bias']\t[3]\tfloat32",
        "['params']['dense']['kernel']\t[2, 3]\tfloat32",
        "['step']\t-\t7",
    ]
    assert run("ls", "cli_targets:small", "params.*.b*").stdout.splitlines() == [
        "['params']['dense']['bias']\t[3]\tfloat32"
    ]


def test_get_shows_facts_stats_and_values():
    out = run("get", "cli_targets:small", "params.dense.kernel")
    assert out.returncode == 0, out.stderr
    lines = [line.rstrip() for line in out.stdout.splitlines()]
    assert lines[0] == "path    ['params']['dense']['kernel']"
    assert "shape   (2, 3)" in lines and "dtype   float32" in lines
    assert any(line.startswith("mean       2.5") for line in lines)
    assert "[[0. 1. 2.]" in lines
    data = json.loads(
        run("get", "cli_targets:small", "['params']['dense']['kernel']", "--json").stdout
    )
    assert data["values"] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert data["stats"]["max"] == 5.0 and data["stats"]["zeros"] == 1


def test_summary_table():
    out = run("summary", "cli_targets:mlp")
    assert out.returncode == 0
    rows = [line.split() for line in out.stdout.splitlines()]
    assert rows[0] == ["path", "type", "leaves", "params", "%", "bytes", "dtypes"]
    assert rows[1][:4] == [".layers", "tuple", "4", "26"]
    assert rows[-1][:4] == ["total", "MLP", "6", "26"]


@pytest.mark.parametrize(("args", "message"), ERRORS)
def test_errors_are_one_line_with_exit_code_2(args, message):
    out = run(*args)
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr == message + "\n"


def test_debug_shows_the_traceback():
    out = run("--debug", "inspect", "cli_targets:broken")
    assert out.returncode == 1
    assert "Traceback" in out.stderr and "RuntimeError: the factory failed" in out.stderr


def test_demo_prints_the_model_and_its_optimizer_state():
    out = run("demo", "--no-tui")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "dict[2]  44.8K params · 179.3 KB"
    assert "├── ['model']  TinyTransformer  14.9K params · 59.8 KB" in lines
    assert "│   │   └── [0..3]  ×4 Block  12.9K params · 51.5 KB" in lines
    assert "    ├── [0]  ScaleByAdamState  29.9K params · 119.6 KB" in lines


def test_demo_without_optax_is_one_line_naming_the_extra():
    """optax is only for the demo (`treetool[demo]`): without it, one error line, exit 2."""
    code = (
        "import sys; sys.modules['optax'] = None\n"
        "from treetool.cli import main\n"
        "sys.exit(main(['demo', '--no-tui']))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert out.stdout == ""
    assert out.stderr == (
        "treetool: error: treetool demo shows an optax optimizer state and needs optax "
        "(pip install 'treetool[demo]')\n"
    )


def test_inspect_a_jaxpr_view_prints_its_equations_and_json():
    out = run("inspect", "cli_targets:jaxpr_view", "--no-tui", "--depth", "1")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "jaxpr loss: 3 inputs → 1 output, 5 equations"
    assert any(".args[0]['w']" in line for line in lines)
    data = json.loads(run("inspect", "cli_targets:jaxpr_view", "--json").stdout)
    assert [i["path"] for i in data["inputs"]] == [".args[0]['b']", ".args[0]['w']", ".args[1]"]
