"""examples/notebook.ipynb runs in a real Jupyter kernel and every show() draws HTML."""

from __future__ import annotations

import html
import re
from pathlib import Path

import nbclient
import nbformat
import pytest

NOTEBOOK = Path(__file__).parents[2] / "examples" / "notebook.ipynb"
MAX_OUTPUT = 2_000_000

# what the HTML of each drawing cell must contain (first line of the cell's source -> texts)
EXPECTED = {
    "model = eqx.nn.MLP(": [".layers[0].weight", ".layers[2].bias", "f32[16,4]", "MLP"],
    "optimizer = optax.adamw(": ["ScaleByAdamState", ".mu", ".nu", "i32[]"],
    "tt.summary(model, depth=2)": [".layers[0]", ".layers[1]", "Linear", "272"],
    "head = eqx.nn.Linear(": [".layers[2].weight", ".layers[0].bias", "value", "4 changes"],
    "def loss(model, x, y):": [".args[0].layers[0].weight", ".args[1]", "dot_general", "loss"],
    "from jax.sharding import": ["['embed']", "['proj']", "['scale']", "cpu:7", "model"],
}


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=180,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path_factory.mktemp("nb"))}},
    )
    client.execute()
    return nb


def _html_outputs(cell) -> list[str]:
    return [
        o["data"]["text/html"]
        for o in cell.get("outputs", [])
        if o["output_type"] in ("display_data", "execute_result") and "text/html" in o["data"]
    ]


def _text(fragment: str) -> str:
    """The visible text of an HTML fragment (tags dropped, entities decoded)."""
    return html.unescape(re.sub(r"<[^>]+>", " ", fragment))


def test_every_drawing_cell_shows_html_with_its_paths(executed):
    code = [c for c in executed.cells if c.cell_type == "code"]
    seen = set()
    for cell in code:
        first = cell.source.splitlines()[0] if cell.source else ""
        key = next((k for k in EXPECTED if first.startswith(k)), None)
        if key is None:
            continue
        seen.add(key)
        outputs = _html_outputs(cell)
        assert len(outputs) == 1, (key, cell.get("outputs"))
        page = outputs[0]
        assert page.startswith('<div class="treetool"'), page[:200]
        text = html.unescape(page)  # paths may sit in attributes (copy buttons) or in text
        for want in EXPECTED[key]:
            assert want in text, f"{key!r}: {want!r} not in its HTML"
        assert _text(page).strip()
    assert seen == set(EXPECTED)


def test_outputs_are_small_and_have_a_text_fallback(executed):
    for cell in (c for c in executed.cells if c.cell_type == "code"):
        for o in cell.get("outputs", []):
            assert o["output_type"] != "error", o.get("evalue")
            if o["output_type"] in ("display_data", "execute_result"):
                size = sum(len(v) for v in o["data"].values())
                assert size < MAX_OUTPUT, (cell.source[:40], size)
                assert o["data"].get("text/plain", "").strip(), cell.source[:40]


def test_nothing_is_fetched_from_the_network(executed):
    for cell in (c for c in executed.cells if c.cell_type == "code"):
        for page in _html_outputs(cell):
            assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), cell.source[:40]
            assert "@import" not in page
