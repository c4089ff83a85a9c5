"""Writes that a planted link, an existing file or a failure midway cannot turn into damage.

`treetool.io._atomic` is the one way treetool writes a file: a temporary file beside the final
name, synced, then `os.replace`-d over it. These cases plant what an attacker (or an accident)
would: a symbolic link at the output name pointing at a file worth keeping, a dangling link, a
folder, a previous export, and a writer that fails halfway.
"""

from __future__ import annotations

import os

import pytest

from treetool._errors import SaveError
from treetool.io._atomic import atomic_path, atomic_write


def _listing(folder) -> list[str]:
    return sorted(os.listdir(folder))


def _write(out, data: bytes, **kw) -> None:
    with atomic_write(out, **kw) as fh:
        fh.write(data)


def _write_then(out, data: bytes, then, **kw) -> None:
    """Write half of `data`, call `then` (which raises, or races), and finish."""
    with atomic_write(out, **kw) as fh:
        fh.write(data[: len(data) // 2])
        then()
        fh.write(data[len(data) // 2 :])


def _raise(exc: BaseException):
    def go():
        raise exc

    return go


def test_planted_link_is_replaced_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    out = tmp_path / "out.bin"
    out.symlink_to(victim)
    _write(out, b"new export", overwrite=True)
    assert victim.read_bytes() == b"precious"
    assert not out.is_symlink()
    assert out.read_bytes() == b"new export"
    assert _listing(tmp_path) == ["out.bin", "victim.txt"]


def test_planted_link_refused_without_overwrite(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    out = tmp_path / "out.bin"
    out.symlink_to(victim)
    with pytest.raises(SaveError) as e:
        _write(out, b"x")
    assert (
        str(e.value) == f"{out}: already exists; not replaced (pass overwrite=True to replace it)"
    )
    assert victim.read_bytes() == b"precious"
    assert out.is_symlink()
    assert _listing(tmp_path) == ["out.bin", "victim.txt"]


def test_dangling_link_counts_as_existing(tmp_path):
    out = tmp_path / "out.bin"
    out.symlink_to(tmp_path / "nowhere" / "target")
    with pytest.raises(SaveError, match="already exists"):
        _write(out, b"x", hint="use --force")
    assert not (tmp_path / "nowhere").exists()
    assert _listing(tmp_path) == ["out.bin"]


def test_existing_file_refused_with_hint_and_kept(tmp_path):
    out = tmp_path / "out.bin"
    out.write_bytes(b"old")
    with pytest.raises(SaveError) as e:
        _write(out, b"new", hint="use --force to replace it")
    assert str(e.value) == f"{out}: already exists; not replaced (use --force to replace it)"
    assert "\n" not in str(e.value)
    assert out.read_bytes() == b"old"
    assert _listing(tmp_path) == ["out.bin"]


def test_file_appearing_during_the_write_is_not_clobbered(tmp_path):
    out = tmp_path / "out.bin"
    # a race: the name is taken after the first check, before the move
    with pytest.raises(SaveError, match="already exists"):
        _write_then(out, b"mine", lambda: out.write_bytes(b"someone else's"))
    assert out.read_bytes() == b"someone else's"
    assert _listing(tmp_path) == ["out.bin"]


def test_failure_midway_keeps_the_previous_export(tmp_path):
    out = tmp_path / "out.bin"
    out.write_bytes(b"previous export" * 100)
    with pytest.raises(RuntimeError, match="disk full"):
        _write_then(out, b"the new export", _raise(RuntimeError("disk full")), overwrite=True)
    assert out.read_bytes() == b"previous export" * 100
    assert _listing(tmp_path) == ["out.bin"]


def test_failure_midway_leaves_nothing_under_a_new_name(tmp_path):
    out = tmp_path / "new.safetensors"
    with pytest.raises(KeyboardInterrupt):
        _write_then(out, b"partial", _raise(KeyboardInterrupt()))
    assert _listing(tmp_path) == []


def test_folder_at_the_name_is_refused(tmp_path):
    out = tmp_path / "out.bin"
    out.mkdir()
    with pytest.raises(SaveError) as e:
        _write(out, b"x", overwrite=True)
    assert str(e.value) == f"{out}: is a folder; not replaced"
    assert out.is_dir() and _listing(tmp_path) == ["out.bin"]


def test_missing_folder_is_one_line(tmp_path):
    out = tmp_path / "no" / "such" / "out.bin"
    with pytest.raises(SaveError) as e:
        _write(out, b"x")
    assert str(e.value) == f"{out}: cannot write here (No such file or directory)"
    assert _listing(tmp_path) == []


def test_planted_link_at_a_temporary_name_is_never_followed(tmp_path, monkeypatch):
    import treetool.io._atomic as atomic

    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    names = iter(["planted", "fresh"])
    monkeypatch.setattr(atomic, "_temp_name", lambda p: str(tmp_path / f".{next(names)}"))
    (tmp_path / ".planted").symlink_to(victim)
    _write(tmp_path / "out.bin", b"data")
    assert victim.read_bytes() == b"precious"
    assert (tmp_path / "out.bin").read_bytes() == b"data"
    assert _listing(tmp_path) == [".planted", "out.bin", "victim.txt"]


def test_new_file_mode_follows_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        _write(tmp_path / "out.bin", b"x")
    finally:
        os.umask(old)
    assert (tmp_path / "out.bin").stat().st_mode & 0o777 == 0o640


def test_atomic_path_keeps_the_extension_and_cleans_up(tmp_path):
    out = tmp_path / "w.npz"
    seen = []

    def fail() -> None:
        with atomic_path(out) as tmp:
            seen.append(tmp)
            with open(tmp, "wb") as fh:
                fh.write(b"partial")
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        fail()
    assert seen[0].endswith(".npz") and os.path.dirname(seen[0]) == str(tmp_path)
    assert _listing(tmp_path) == []
    with atomic_path(out) as tmp, open(tmp, "wb") as fh:
        fh.write(b"whole")
    assert out.read_bytes() == b"whole"
    assert _listing(tmp_path) == ["w.npz"]
