"""The notebook HTML in a real browser: headless Chromium runs the pages and reports no errors.

One page holds the views of an eqx.nn.MLP, of a diff and of a jaxpr (as a notebook holds many
outputs, so the copy script runs three times); a page-level `window.onerror` writes a marker
into the DOM, and a last script clicks a copy button and a folded row and writes what happened.
Skipped where `chromium` is not installed.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

import treetool as tt
from treetool._display import to_html

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")

_HEAD = """<!doctype html><html><head><meta charset="utf-8"><script>
window.onerror = function (msg, src, line) {
  var d = document.createElement("div");
  d.className = "tt-js-error";
  d.textContent = "JS ERROR: " + msg + " at " + line;
  (document.body || document.documentElement).appendChild(d);
};
</script></head><body>"""

_PROBE = """<script>
(function () {
  var out = [];
  out.push("views=" + document.querySelectorAll(".treetool").length);
  out.push("scripted=" + document.querySelectorAll(".treetool[data-tt-js]").length);
  var b = document.querySelector('.treetool[data-tt="tree"] summary .tt-cp');
  var row = b.closest("details"), was = row.open;
  b.click();
  out.push("copied=" + b.getAttribute("data-copied"));
  out.push("row_toggled=" + (row.open !== was));
  var folded = document.querySelector('.treetool[data-tt="jaxpr"] details:not([open]) > summary');
  folded.click();
  out.push("unfolded=" + folded.parentNode.open);
  var more = document.querySelector(".treetool details.tt-mf > summary");
  more.click();
  out.push("more=" + more.textContent + "/" + more.parentNode.open);
  var r = document.createElement("div");
  r.id = "tt-probe";
  r.textContent = out.join(";");
  document.body.appendChild(r);
})();
</script></body></html>"""


@pytest.fixture(scope="module")
def views():
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    mlp = eqx.nn.MLP(4, 2, 16, 2, key=jax.random.key(0))
    edited = tt.tree_at(lambda m: m.layers[2], mlp, eqx.nn.Linear(16, 3, key=jax.random.key(1)))

    def loss(model, x):
        return jnp.mean(jax.vmap(model)(x) ** 2)

    jx = tt.jaxpr(loss, mlp, jnp.ones((8, 4)))
    return [to_html(mlp, width=2), to_html(tt.diff(mlp, edited)), to_html(jx, depth=1)]


def _dump_dom(page: str, tmp_path) -> tuple[str, str]:
    f = tmp_path / "page.html"
    f.write_text(page, encoding="utf-8")
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=2000",
            "--dump-dom",
            f.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, proc.stderr


def test_views_run_in_chromium_without_script_errors(views, tmp_path):
    dom, log = _dump_dom(_HEAD + "".join(views) + _PROBE, tmp_path)
    assert "tt-js-error" not in dom.replace('className = "tt-js-error"', "")
    assert "Uncaught" not in log
    probe = re.search(r'<div id="tt-probe">(.*?)</div>', dom)
    assert probe is not None, dom[-2000:]
    assert probe.group(1).split(";") == [
        "views=3",
        "scripted=3",
        "copied=.layers",
        "row_toggled=false",  # the copy button does not fold its row
        "unfolded=true",  # folding is the browser's own <details>: no script needed
        "more=… 1 more/true",  # rows past `width` unfold the same way
    ]


def test_a_hostile_key_stays_text_in_the_browser(tmp_path):
    key = '"><img src=x onerror="document.title=1"><script>document.title="pwned"</script>'
    probe = (
        '<script>var r = document.createElement("div"); r.id = "tt-probe";'
        'r.textContent = "title=" + document.title + ";img=" + document.images.length;'
        "document.body.appendChild(r);</script></body></html>"
    )
    dom, _ = _dump_dom(_HEAD + to_html({key: [1.0]}) + probe, tmp_path)
    assert '<div id="tt-probe">title=;img=0</div>' in dom
    assert "&lt;img src=x onerror=" in dom  # drawn as text, in the row of its key
