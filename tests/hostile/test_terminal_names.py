"""Names that attack the terminal reach it escaped, through the real `treetool` command.

Each file (pickle, npz, safetensors, orbax) names its keys, attributes, classes, members or
tensors with markup, escape sequences, newlines and bidi overrides (`hostile_names.py`). Every
command must print them literally, escaped, with no control byte on stdout or stderr, and
never parse them as rich markup.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import assert_contained, run_cli
from hostile_names import (
    CLICK,
    NAMES,
    SHOWN,
    write_npz,
    write_orbax,
    write_pickle,
    write_safetensors,
)

WIDE = {"COLUMNS": "400"}  # rich wraps long cells at 80 columns; keep each name on one line


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("names")
    click = d / "clicked"
    write_pickle(d / "names.pkl", click)
    write_npz(d / "names.npz", click)
    write_safetensors(d / "names.safetensors", click)
    write_orbax(d / "names.orbax", click)
    return d


FILES = {
    # file -> names whose escaped form every listing must show
    "names.pkl": NAMES,
    "names.npz": [n for n in NAMES if "/" not in n],
    "names.safetensors": NAMES,
    "names.orbax": NAMES,
}


@pytest.mark.parametrize("name", list(FILES))
def test_ls_prints_one_escaped_line_per_leaf(files, name):
    run = run_cli("ls", name, cwd=files, env=WIDE)
    assert_contained(run, rc=0, ls_fields=True, max_seconds=20)
    lines = run.stdout.splitlines()
    per_name = 2 if name == "names.pkl" else 1  # each pickled object has `.NAME` and `.ok`
    click = name != "names.npz"  # the click name holds a directory: no npz member has a `/`
    assert len(lines) == (len(FILES[name]) + click) * per_name
    for n in FILES[name]:
        assert SHOWN[n] in run.stdout, (n, run.stdout)
    assert ("[@click=app.screenshot('x.svg'," in run.stdout) == click
    if name == "names.pkl":  # the attribute names, escaped as well as the keys
        assert "['a\\nb\\tc'].a\\nb\\tc\t[3]\tfloat32" in lines
        assert "['\\u202eevil'].\\u202eevil\t[3]\tfloat32" in lines
        # the class names are in the note on stderr, escaped: its head, then every global
        # on a line of its own (none cut off, none able to break the note into other lines)
        err = run.stderr.splitlines()
        assert err[0].startswith("treetool: note: names.pkl: 10 globals not executed")
        assert len(err) == 11 and all(line.startswith("  evil") for line in err[1:]), err
        assert not any(c in run.stderr for c in "\x1b\x07\x9b\u202e")
        assert "evil\\x1b]0;t\\x07mod4.\\x1b[2J\\x1b]0;pwned\\x07" in run.stderr


@pytest.mark.parametrize("name", list(FILES))
def test_inspect_prints_names_literally_never_as_markup(files, name):
    run = run_cli("inspect", name, "--no-tui", cwd=files, env=WIDE)
    assert_contained(run, rc=0, max_seconds=20)
    for n in FILES[name]:
        assert SHOWN[n] in run.stdout, (n, run.stdout)
    # markup would have eaten the brackets: `[bold red]x` printed as `x`, `[/]` as ``
    assert "'[bold red]x'" in run.stdout
    assert ("'[/oops]'" in run.stdout) == (name != "names.npz")
    assert ("]WWW[/]" in run.stdout) == (name != "names.npz")


@pytest.mark.parametrize("name", ["names.pkl", "names.safetensors"])
def test_summary_table_shows_class_and_key_names_as_text(files, name):
    run = run_cli("summary", name, cwd=files, env=WIDE)
    assert_contained(run, rc=0, max_seconds=20)
    for n in NAMES:
        assert SHOWN[n] in run.stdout, (n, run.stdout)
    if name == "names.pkl":  # the type column holds the class names: `Y[/]` etc.
        rows = {line.split()[0]: line for line in run.stdout.splitlines()[1:-1]}
        assert "  [/]  " in rows["['[/]']"]
        assert "  [bold red]x  " in rows["['[bold"]


def test_get_shows_the_escaped_path_and_repr(files):
    run = run_cli("get", "names.safetensors", "['[/oops]']", cwd=files, env=WIDE)
    assert_contained(run, rc=0)
    assert run.stdout.splitlines()[0].split() == ["path", "['[/oops]']"]
    run = run_cli("get", "names.pkl", "['\\u202eevil'].ok", cwd=files, env=WIDE)
    assert_contained(run, rc=0)
    assert run.stdout.splitlines()[0].split() == ["path", "['\\u202eevil'].ok"]


def test_diff_shows_changed_names_escaped(files):
    run = run_cli("diff", "names.safetensors", "names.orbax", cwd=files, env=WIDE)
    assert_contained(run, rc=1, max_seconds=20)
    # every tensor changed shape (f32[2] -> f32[3]): one change row per hostile name
    for n in NAMES:
        assert SHOWN[n] + "']  shape  f32[2] → f32[3]" in run.stdout, (n, run.stdout)


def test_error_lines_escape_names_from_the_file_and_the_command_line(files):
    # a path that does not exist: the error quotes the file's keys (the nearest names)
    run = run_cli("get", "names.safetensors", "['[/oops]'].nope\x1b[2J", cwd=files)
    assert_contained(run)
    assert "nope\\x1b[2J" in run.stderr
    run = run_cli("get", "names.safetensors", "['zz']", cwd=files)
    assert_contained(run)
    assert "'a\\nb\\tc'" in run.stderr  # the keys it does have, escaped
    # a file name that is itself an attack
    run = run_cli("ls", "\x1b]0;title\x07[/].npz", cwd=files)
    assert_contained(run)
    assert run.stderr == (
        "treetool: error: \\x1b]0;title\\x07[/].npz: no such file or directory "
        "(and not a module:attr object)\n"
    )


def test_a_truncated_file_names_its_hostile_tensor_escaped(files, tmp_path):
    data = (files / "names.safetensors").read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(data[:-8])
    run = run_cli("ls", "cut.safetensors", cwd=tmp_path)
    assert_contained(run)
    assert run.stderr.startswith("treetool: error: cut.safetensors: ")


def test_click_name_is_never_a_file_written(files):
    run = run_cli("inspect", "names.pkl", "--no-tui", cwd=files, env=WIDE)
    assert_contained(run, rc=0, max_seconds=20)
    assert CLICK.format(dir=files / "clicked")[:20] in run.stdout
    assert not (files / "clicked").exists()


@pytest.mark.parametrize("command", ["ls", "inspect", "summary"])
def test_json_output_is_json_with_no_control_characters(files, command):
    import json

    run = run_cli(command, "names.safetensors", "--json", cwd=files)
    assert_contained(run, rc=0)
    data = json.loads(run.stdout)
    text = json.dumps(data)
    for n in NAMES:  # every keystr, in JSON escapes (a JSON reader gets it back exactly)
        assert json.dumps(f"[{n!r}]")[1:-1] in text, n
