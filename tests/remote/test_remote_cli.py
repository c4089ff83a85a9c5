"""The `treetool` command on URLs, in a real subprocess with the standard environment."""

from __future__ import annotations

import json
import os
from typing import Any

from storage_servers import BUCKET

from conftest import cli as _cli
from conftest import cli_on_terminal, s3_env


def test_ls_of_a_sharded_s3_set_equals_the_single_local_file(
    s3: Any, files: dict, tmp_path: Any
) -> None:
    env = s3_env(s3)
    remote = _cli(
        "ls", f"s3://{BUCKET}/run/model.safetensors.index.json", env=env, cwd=str(tmp_path)
    )
    local = _cli("ls", os.path.join(files["root"], "model.safetensors"), env={}, cwd=str(tmp_path))
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout
    assert "['model.layers.1.attn.weight']" in remote.stdout
    assert remote.stderr == ""


def test_inspect_json_names_each_leaf_shard(gcs: Any, tmp_path: Any) -> None:
    env = {"STORAGE_EMULATOR_HOST": gcs.host}
    url = f"gs://{BUCKET}/run/model.safetensors.index.json"
    out = _cli("inspect", "--json", url, env=env, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["format"] == "sharded"
    by_path = {leaf["path"]: leaf for leaf in data["leaves"]}
    head = by_path["['lm_head.weight']"]
    assert head["shard"] == f"gs://{BUCKET}/run/model-00003-of-00003.safetensors"
    assert head["shape"] == [16, 64] and head["dtype"] == "float32"
    assert isinstance(head["offset"], int) and head["offset"] > 8
    assert data["totals"]["leaves"] == 8


def test_value_diff_of_two_s3_checkpoints(s3: Any, tmp_path: Any) -> None:
    a, b = f"s3://{BUCKET}/run/ckpt.pkl", f"s3://{BUCKET}/run/ckpt2.pkl"
    out = _cli("diff", a, b, "--json", env=s3_env(s3), cwd=str(tmp_path))
    assert out.returncode == 1, out.stderr
    changes = json.loads(out.stdout)["changes"]
    assert [(c["path"], c["kind"]) for c in changes] == [("['params']['b']", "value")]
    same = _cli("diff", a, a, env=s3_env(s3), cwd=str(tmp_path))
    assert same.returncode == 0, same.stderr


def test_get_reads_one_leaf_over_http(http: Any, tmp_path: Any) -> None:
    out = _cli("get", f"{http.url}/big.pkl", "['c']", env={}, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "f32[50000]" in out.stdout or "(50000,)" in out.stdout
    # 200 KB, under the 8 MB of a remote leaf `get` reads for its stats unasked
    assert "not computed" not in out.stdout
    assert any(line.split()[:1] == ["mean"] for line in out.stdout.splitlines())
    out = _cli("get", f"{http.url}/big.pkl", "['c']", "--stats", env={}, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "mean" in out.stdout


def test_cli_errors_are_one_line(s3: Any, http: Any, tmp_path: Any) -> None:
    out = _cli("ls", f"s3://{BUCKET}/run/nope.pkl", env=s3_env(s3), cwd=str(tmp_path))
    assert out.returncode == 2
    assert out.stderr == (
        f"treetool: error: s3://{BUCKET}/run/nope.pkl: no such object "
        f"(bucket '{BUCKET}' or its key does not exist)\n"
    )
    out = _cli("inspect", "--no-tui", f"{http.url}/403/ckpt.pkl", env={}, cwd=str(tmp_path))
    assert out.returncode == 2
    assert out.stderr == f"treetool: error: {http.url}/403/ckpt.pkl: access denied (HTTP 403)\n"
    assert out.stdout == ""
    assert os.listdir(tmp_path) == []  # nothing downloaded or cached on disk


def test_progress_line_on_a_terminal_only(http: Any, tmp_path: Any) -> None:
    url = f"{http.url}/big.pkl"
    env = {**os.environ, "TREETOOL_PROGRESS_AFTER": "0", "HOME": str(tmp_path), "TERM": "xterm"}
    code, stdout, terminal = cli_on_terminal(
        "get", url, "['c']", "--stats", env=env, cwd=str(tmp_path)
    )
    assert code == 0
    assert b"reading remote bytes" in terminal  # on the terminal (stderr)
    assert b"reading remote bytes" not in stdout and b"mean" in stdout  # stdout stays clean
    piped = _cli("get", url, "['c']", env={"TREETOOL_PROGRESS_AFTER": "0"}, cwd=str(tmp_path))
    assert piped.returncode == 0 and piped.stderr == ""  # not a terminal: nothing on stderr


def test_orbax_run_on_s3_inspect_step_get_and_diff(
    s3: Any, s3_orbax: str, orbax_local: str, tmp_path: Any
) -> None:
    env, cwd = s3_env(s3), str(tmp_path)
    remote = _cli("inspect", s3_orbax, env=env, cwd=cwd)
    local = _cli("inspect", orbax_local, env={}, cwd=cwd)
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout
    assert remote.stdout.startswith("step 2; steps: 1, 2\n")
    assert remote.stderr == (
        f"treetool: note: {s3_orbax}: an orbax run with steps 1, 2; showing step 2 "
        f"(pick one: {s3_orbax}@1 or --step 1)\n"
    )
    one = _cli("inspect", s3_orbax, "--step", "1", env=env, cwd=cwd)
    assert one.returncode == 0 and one.stdout.startswith("step 1; steps: 1, 2\n")
    assert one.stderr == ""
    got = _cli("get", f"{s3_orbax}@1", "params.w", "--json", env=env, cwd=cwd)
    assert got.returncode == 0, got.stderr
    out = json.loads(got.stdout)
    assert (out["shape"], out["dtype"]) == ([4, 6], "float32")
    nested = [v for v in out.values() if isinstance(v, list) and v and isinstance(v[0], list)]
    assert nested == [[[6.0 * r + c for c in range(6)] for r in range(4)]]  # arange(24) * 1
    diff = _cli("diff", f"{s3_orbax}@1", f"{s3_orbax}@2", "--json", env=env, cwd=cwd)
    assert diff.returncode == 1, diff.stderr
    changed = sorted(c["path"] for c in json.loads(diff.stdout)["changes"])
    assert changed == ["['params']['w']", "['step']"]


def test_get_json_says_which_file_or_url_holds_the_leaf(
    http: Any, files: dict, tmp_path: Any
) -> None:
    """A leaf still in its file says which one (the path, or the URL of a remote one) and
    where its bytes start; `device` stays `file` (on no jax device), as in `ls --json`."""
    import pickle

    local_path = os.path.join(files["root"], "big.pkl")
    with open(local_path, "rb") as fh:
        raw = fh.read()
    want = pickle.loads(raw)["c"].tobytes()
    url = f"{http.url}/big.pkl"
    got = {}
    for spec in (url, local_path):
        out = _cli("get", "--json", spec, "['c']", env={}, cwd=str(tmp_path))
        assert out.returncode == 0, out.stderr
        got[spec] = json.loads(out.stdout)
    remote, local = got[url], got[local_path]
    assert (remote["file"], local["file"]) == (url, local_path)
    assert remote["offset"] == local["offset"] == raw.index(want)
    assert remote["device"] == local["device"] == "file"
    assert remote["nbytes"] == len(want)
