"""Hostile rule files for `tt.port(..., rules=)` / `treetool port --rules`: too big, too deep,
not UTF-8. Every file is built here, in the test run."""

from __future__ import annotations

import numpy as np
import pytest
from harness import assert_contained, run_cli

import treetool as tt
from treetool._port._rules import MAX_RULES_BYTES

pytestmark = [
    pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

F32 = np.float32


def _tree() -> dict:
    return {"a": np.arange(6, dtype=F32).reshape(2, 3), "b": np.ones(3, F32)}


@pytest.fixture
def plan_args(tmp_path):
    src = tmp_path / "src.safetensors"
    tt.save(_tree(), str(src))
    return str(src), _tree()


def test_rule_file_over_the_budget_is_refused_not_cut(tmp_path, plan_args):
    # a valid rule past the cut: a silent cut would have ignored it
    rules = tmp_path / "big.rules"
    pad = b"# padding\n" * (MAX_RULES_BYTES // 10)
    rules.write_bytes(pad + b'"[\'a\']" <- "nope" : identity\n')
    with pytest.raises(tt.TreetoolError) as e:
        tt.port(*plan_args, rules=str(rules))
    size = rules.stat().st_size
    assert str(e.value) == (
        f"{rules}: the rule file is {size:,} bytes, over the 16 MiB a rule file may be; not read"
    )


def test_rule_file_at_the_budget_is_read_whole(tmp_path, plan_args):
    rules = tmp_path / "edge.rules"
    tail = b'"[\'a\']" <- "nope" : identity\n'
    pad = b"#" * (MAX_RULES_BYTES - len(tail) - 1) + b"\n"
    rules.write_bytes(pad + tail)
    assert rules.stat().st_size == MAX_RULES_BYTES
    with pytest.raises(tt.TreetoolError) as e:  # the last line was read: its source is unknown
        tt.port(*plan_args, rules=str(rules))
    assert str(e.value) == f"{rules}: ['a']: the source has no entry 'nope'"


@pytest.mark.parametrize(
    "line",
    [
        "[" * 100_000,
        "\"['a']\" <- " + "[" * 100_000,
        "{" * 100_000,
        '"[\'a\']" <- "a" : ' + "(" * 100_000,
    ],
)
def test_deep_nesting_is_one_line_not_recursion(tmp_path, plan_args, line):
    rules = tmp_path / "deep.rules"
    rules.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(tt.TreetoolError) as e:
        tt.port(*plan_args, rules=str(rules))
    msg = str(e.value)
    assert msg.startswith(f"{rules}: line 1: ") and "\n" not in msg and len(msg) < 700


def test_rule_file_not_utf8_is_one_line(tmp_path, plan_args):
    rules = tmp_path / "latin1.rules"
    rules.write_bytes(b"# caf\xe9\n")
    with pytest.raises(tt.TreetoolError) as e:
        tt.port(*plan_args, rules=str(rules))
    assert str(e.value) == (
        f"{rules}: cannot read the rule file: not UTF-8 (invalid continuation byte at byte 5)"
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["deep", "big"])
def test_cli_hostile_rule_files_are_contained(tmp_path, kind):
    tt.save(_tree(), str(tmp_path / "src.safetensors"))
    rules = tmp_path / f"{kind}.rules"
    if kind == "deep":
        rules.write_text("[" * 100_000 + "\n", encoding="utf-8")
        want = f"{kind}.rules: line 1: expected a quoted name "
    else:
        rules.write_bytes(b"# x\n" * (MAX_RULES_BYTES // 4 + 1))
        want = f"{kind}.rules: the rule file is {MAX_RULES_BYTES + 4:,} bytes, over the 16 MiB"
    r = run_cli(
        "port", "src.safetensors", "src.safetensors", "--rules", f"{kind}.rules", cwd=tmp_path
    )
    assert_contained(r)
    assert r.stderr.startswith(f"treetool: error: {want}"), str(r)
