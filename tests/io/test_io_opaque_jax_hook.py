"""`Opaque` is registered with jax when jax is imported after treetool: the one-shot hook.

Each case runs in a fresh interpreter, where jax is not imported yet.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap

import equinox as eqx
import jax


def _run(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_hook_is_one_shot_and_leaves_jax_as_found(tmp_path):
    f = tmp_path / "m.pkl"
    f.write_bytes(pickle.dumps(eqx.nn.Linear(2, 3, key=jax.random.key(0))))
    out = _run(
        f"""
        import sys
        import treetool as tt
        from treetool.io import _opaque

        tree = {{"m": tt.load({str(f)!r})}}
        assert "jax" not in sys.modules
        hooks = [h for h in sys.meta_path if type(h).__name__ == "_JaxImportHook"]
        assert len(hooks) == 1 and sys.meta_path[0] is hooks[0], sys.meta_path
        before = list(sys.meta_path[1:])

        import json  # other imports go past it untouched
        assert sys.meta_path[0] is hooks[0] and not _opaque._registered

        import jax
        # registered, the hook gone, the rest of sys.meta_path as it was
        assert _opaque._registered and sys.meta_path == before, sys.meta_path
        # jax's loader keeps no trace of the wrapper
        assert "exec_module" not in vars(jax.__spec__.loader)

        leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
        print([jax.tree_util.keystr(p) for p, _ in leaves])
        print([tuple(x.shape) for _, x in leaves])
        # and back: unflatten rebuilds an Opaque with the same fields
        flat, treedef = jax.tree_util.tree_flatten(tree)
        again = jax.tree_util.tree_unflatten(treedef, flat)
        print(type(again["m"]).__name__, again["m"].class_path)
        """
    )
    assert out.splitlines() == [
        "[\"['m'].weight\", \"['m'].bias\"]",
        "[(3, 2), (3,)]",
        "Opaque equinox.nn._linear.Linear",
    ]


def test_no_hook_when_jax_is_already_imported():
    out = _run(
        """
        import sys
        import jax
        from treetool.io import _opaque

        print(_opaque._registered, any(type(h).__name__ == "_JaxImportHook" for h in sys.meta_path))
        """
    )
    assert out.split() == ["True", "False"]
