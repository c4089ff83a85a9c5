"""The hostile-file harness measures what it claims: exit code, one error line, memory, files."""

from __future__ import annotations

import numpy as np
from harness import assert_contained, control_chars, run_cli


def test_a_missing_file_is_one_error_line(tmp_path):
    run = run_cli("ls", "nothing.npz", cwd=tmp_path)
    assert_contained(run)
    assert run.stderr.startswith("treetool: error: ")
    assert "nothing.npz" in run.stderr


def test_a_good_file_is_listed_and_measured(tmp_path):
    np.savez(tmp_path / "ok.npz", w=np.zeros((2, 3), np.float32))
    run = run_cli("ls", "ok.npz", cwd=tmp_path)
    assert_contained(run, rc=0, ls_fields=True)
    assert run.stdout == "['w']\t[2, 3]\tfloat32\n"
    assert 10 << 20 < run.peak_rss < 1 << 30


def test_files_written_by_the_child_are_seen(tmp_path):
    np.savez(tmp_path / "ok.npz", w=np.zeros(2, np.float32))
    # `--debug` output aside, nothing in treetool writes files on `ls`; `diff --json` to a path
    # does not exist, so plant a writer through the environment the child honours: sitecustomize.
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text("open('home/planted', 'w').close()\n")
    run = run_cli("ls", "ok.npz", cwd=tmp_path, env={"PYTHONPATH": str(tmp_path / "site")})
    assert run.new_files == ["home/planted"]
    run = run_cli("ls", "ok.npz", cwd=tmp_path, env={"PYTHONPATH": str(tmp_path / "site")})
    assert run.new_files == []  # only files created during the run count


def test_control_characters_are_found():
    assert control_chars("a\x1b]0;title\x07b\n") == ["\x1b", "\x07"]
    assert control_chars("\u202eevil") == ["\u202e"]
    assert control_chars("plain text\nnext line") == []
