"""`module:attr` imports code by design, and nothing more than the module it names.

The current directory is appended to the import path, never put first: a stray `rich.py` or
`numpy.py` next to a checkpoint is not imported when treetool renders. `X:Y` is read as a
module only when X is a dotted identifier and no file `X:Y` exists.
"""

from __future__ import annotations

import numpy as np
from harness import assert_contained, run_cli

#: a module that, if imported, leaves a file behind (and breaks the import of the real one)
STRAY = "open('IMPORTED-' + __name__, 'w').close()\nraise ImportError('stray ' + __name__)\n"


def test_stray_modules_in_the_cwd_do_not_shadow_libraries(tmp_path):
    for name in ("rich", "numpy", "textual", "jax"):
        (tmp_path / f"{name}.py").write_text(STRAY)
    np.savez(tmp_path / "ok.npz", w=np.zeros((2, 3), np.float32))
    (tmp_path / "mymodel.py").write_text(
        "import numpy as np\n\ndef make():\n    return {'w': np.ones((4, 2), np.float32)}\n"
    )
    for args in (("inspect", "ok.npz", "--no-tui"), ("summary", "ok.npz"), ("ls", "mymodel:make")):
        run = run_cli(*args, cwd=tmp_path)
        assert_contained(run, rc=0, ls_fields=args[0] == "ls")
        assert not list(tmp_path.glob("IMPORTED-*")), args
    assert run.stdout == "['w']\t[4, 2]\tfloat32\n"  # mymodel was imported, from the cwd


def test_a_file_named_like_a_target_is_read_not_imported(tmp_path):
    (tmp_path / "ckpt.py").write_text(STRAY)
    np.savez(tmp_path / "tmp.npz", w=np.zeros(3, np.float32))
    (tmp_path / "tmp.npz").rename(tmp_path / "ckpt:v2")  # a file whose name has a colon
    run = run_cli("ls", "ckpt:v2", cwd=tmp_path)
    assert_contained(run, rc=0, ls_fields=True)
    assert run.stdout == "['w']\t[3]\tfloat32\n"
    assert not list(tmp_path.glob("IMPORTED-*"))


def test_only_dotted_identifiers_name_modules(tmp_path):
    (tmp_path / "my-model.py").write_text(STRAY)
    for target in ("my-model:make", "./mymodel:make", "a/b:c", "1x:y", ":make"):
        run = run_cli("ls", target, cwd=tmp_path)
        assert_contained(run)
        assert "no such file or directory (and not a module:attr object)" in run.stderr, target
    assert not list(tmp_path.glob("IMPORTED-*"))
