"""`to_html`: the notebook view of real trees, diffs, jaxprs, summaries and placements.

Every page is parsed with `html.parser` (balanced tags, one script, no event attributes), and
the rows a notebook shows open are compared with the rich view's lines: both say the same.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from html.parser import HTMLParser

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

import treetool as tt
from treetool._diff._html import diff_html
from treetool._display import to_html
from treetool._leaves._arrays import LazyArray
from treetool._lowering._html_base import DTYPE_CLASSES, dtype_class
from treetool._lowering._labels import DTYPE_STYLES
from treetool._tree import _html as html_tree
from treetool.io._opaque import Opaque

_ROWS = {"summary", "div"}
_ROW_CLASSES = {"tt-l", "tt-more"}
_VOID = {"br", "img", "input", "meta", "hr", "wbr", "col", "source"}


class Page(HTMLParser):
    """A parsed fragment: tags, attributes, rows (with their span texts) and tag errors."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, dict]] = []
        self.errors: list[str] = []
        self.tags: Counter = Counter()
        self.attrs: list[tuple[str, dict]] = []
        self.rows: list[dict] = []
        self._row: dict | None = None
        self._row_level = 0
        self.feed(text)
        self.close()
        if self.stack:
            self.errors.append(f"unclosed: {[t for t, _ in self.stack]}")

    def handle_starttag(self, tag: str, attrs: list) -> None:
        d = {k: (v or "") for k, v in attrs}
        self.tags[tag] += 1
        self.attrs.append((tag, d))
        cls = set(d.get("class", "").split())
        if self._row is None and (tag == "summary" or (tag == "div" and cls & _ROW_CLASSES)):
            enclosing = [a for t, a in self.stack if t == "details"]
            if tag == "summary":
                enclosing = enclosing[:-1]  # its own details may be closed: it still shows
            self._row = {
                "tag": tag,
                "cls": cls,
                "visible": all("open" in a for a in enclosing),
                "parts": [],
            }
            self._row_level = len(self.stack) + 1
        if tag not in _VOID:
            self.stack.append((tag, d))

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID:
            return
        if not self.stack or self.stack[-1][0] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1][0] if self.stack else None}")
            return
        self.stack.pop()
        if self._row is not None and len(self.stack) < self._row_level:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._row is None:
            return
        inner = [set(a.get("class", "").split()) for t, a in self.stack[self._row_level :]]
        tags = [t for t, _ in self.stack[self._row_level :]]
        if "button" in tags or "svg" in tags or any({"tt-st", "tt-nan"} & c for c in inner):
            return
        self._row["parts"].append(data)

    # --- queries ---
    def text_rows(self, visible_only: bool = True, sep: str = " ") -> list[str]:
        """Each row's words, whitespace collapsed (`['w'] f32[2,3] 6 params · 24 B`)."""
        return [_norm(sep.join(r["parts"])) for r in self.rows if r["visible"] or not visible_only]

    def titles(self) -> list[str]:
        """The full paths of the rows (the `title` of each `.tt-k`)."""
        return [a["title"] for t, a in self.attrs if "tt-k" in a.get("class", "").split()]

    def classes_of(self, text: str) -> list[set]:
        return [set(a.get("class", "").split()) for t, a in self.attrs if a.get("title") == text]


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def parse(page: str) -> Page:
    """Parse and check what every fragment promises."""
    assert page.startswith('<div class="treetool" data-tt="') and page.endswith("</div>")
    p = Page(page)
    assert p.errors == []
    assert p.tags["script"] == 1 and p.tags["style"] == 1
    assert p.tags["img"] == p.tags["h1"] == 0
    for tag, attrs in p.attrs:
        assert not [k for k in attrs if k.startswith("on")], (tag, attrs)
        assert tag not in ("link", "iframe", "object", "embed")
    assert "http://" not in page and "https://" not in page  # nothing fetched
    return p


def rich_rows(obj, **kw) -> list[str]:
    """The rich view's lines, tree guides dropped, whitespace collapsed."""
    c = Console(file=io.StringIO(), width=400, color_system=None)
    c.print(tt.render(obj, **kw))
    lines = c.file.getvalue().splitlines()
    return [_norm(re.sub(r"^[│├└─ ]*", "", line)) for line in lines if line.strip()]


# --- real trees --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real():
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import optax

    mlp = eqx.nn.MLP(4, 2, 16, 2, key=jax.random.key(0))
    opt = optax.adamw(1e-3).init(eqx.filter(mlp, eqx.is_array))
    edited = tt.tree_at(lambda m: m.layers[2], mlp, eqx.nn.Linear(16, 3, key=jax.random.key(1)))
    edited = tt.tree_at(".layers[0].bias", edited, mlp.layers[0].bias + 1)

    def loss(model, x, y):
        return jnp.mean((jax.vmap(model)(x) - y) ** 2)

    jx = tt.jaxpr(loss, mlp, jnp.ones((8, 4)), jnp.ones((8, 2)))
    return {"mlp": mlp, "opt": opt, "edited": edited, "jaxpr": jx, "jax": jax, "jnp": jnp}


def test_mlp_shows_every_path_label_and_the_totals(real):
    mlp = real["mlp"]
    page = to_html(mlp)
    p = parse(page)
    node_paths = [str(n.path) for n in tt.view(mlp).walk()][1:]
    assert p.titles() == node_paths
    assert ".layers[0].weight" in node_paths and ".final_activation" in node_paths
    rows = p.text_rows()
    assert rows[0] == "MLP 8 leaves (6 arrays) 386 params 1.5 KB f32 ×6 cpu:0"
    assert "[0] Linear 80 params · 320 B" in rows
    assert ".weight f32[16,4] 64 params · 256 B" in rows
    assert ".activation <custom_jvp relu>" in rows
    # one histogram and stats per array leaf
    assert p.tags["svg"] == 6 and page.count("<i>mean</i>") == 6
    assert p.tags["button"] == len(node_paths)


@pytest.mark.parametrize("name", ["mlp", "opt"])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_open_rows_say_what_the_terminal_says(real, name, depth):
    tree = real[name]
    p = parse(to_html(tree, depth=depth))
    assert p.text_rows()[1:] == rich_rows(tree, depth=depth)[1:]


def test_levels_below_depth_are_drawn_closed(real):
    p = parse(to_html(real["mlp"], depth=1))
    hidden = [r for r in p.text_rows(visible_only=False) if r not in p.text_rows()]
    assert ".weight f32[16,4] 64 params · 256 B" in hidden
    assert [t for t in p.titles() if t.count(".") == 1 and "[" not in t] == [
        ".layers",
        ".activation",
        ".final_activation",
    ]
    opened = [a for t, a in p.attrs if t == "details" and "open" in a]
    assert len(opened) == 1  # the root only


def test_optax_state_paths_and_labels(real):
    p = parse(to_html(real["opt"], depth=6))
    titles = p.titles()
    assert "[0].mu.layers[1].weight" in titles and "[0].nu.layers[2].bias" in titles
    rows = p.text_rows()
    assert "[0] ScaleByAdamState 773 params · 3.1 KB" in rows
    assert ".count i32[] 0 1 param · 4 B" in rows
    assert "[1] EmptyState" in rows


def test_dict_of_jax_arrays_badges_follow_the_terminal_colours(real):
    jax, jnp = real["jax"], real["jnp"]
    tree = {
        "f": jnp.ones((2, 3)),
        "bf": jnp.ones(3, jnp.bfloat16),
        "i": jnp.arange(4, dtype=jnp.int8),
        "u": jnp.zeros(2, jnp.uint8),
        "c": jnp.ones(2, jnp.complex64),
        "b": jnp.array([True, False]),
        "k": jax.random.key(0),
    }
    page = to_html(tree)
    p = parse(page)
    badges = {
        "f32[2,3]": "tt-f",
        "bf16[3]": "tt-bf",
        "i8[4]": "tt-i",
        "u8[2]": "tt-u",
        "c64[2]": "tt-cx",
        "bool[2]": "tt-b",
        "key&lt;fry&gt;[]": "tt-key",
    }
    for text, cls in badges.items():
        assert f'<span class="tt-t {cls}">{text}</span>' in page
    assert "['k'] key<fry>[] 8 B [key]" in p.text_rows()
    # the terminal's colour families map one to one onto badge classes
    assert set(DTYPE_CLASSES) == set(DTYPE_STYLES.values())
    assert len(set(DTYPE_CLASSES.values())) == len(DTYPE_CLASSES)
    assert dtype_class("object") == "tt-o"
    assert "cpu:0" in p.text_rows()[0]


# --- escaping ----------------------------------------------------------------------------

HOSTILE = ["<script>alert(1)</script>", '"><img src=x onerror=alert(2)>', "</span></summary><h1>x"]


def test_keys_and_reprs_from_untrusted_trees_are_escaped():
    tree = {k: np.arange(3.0) for k in HOSTILE}
    tree["v"] = "<script>alert(3)</script>"
    tree["o"] = Opaque('evil.<b onclick="x">', state={"<i>": 1.0})
    page = to_html(tree)
    p = parse(page)  # one script (ours), no <img>, no on* attribute, balanced tags
    for k in HOSTILE:
        assert k not in page
    assert "[&#x27;&lt;script&gt;alert(1)&lt;/script&gt;&#x27;]" in page
    assert "[&#x27;&quot;&gt;&lt;img src=x onerror=alert(2)&gt;&#x27;]" in page
    assert "&#x27;&lt;script&gt;alert(3)&lt;/script&gt;&#x27;" in page
    titles = p.titles()
    assert "['<script>alert(1)</script>']" in titles
    assert "['\"><img src=x onerror=alert(2)>']" in titles
    assert "['o'].<i>" in titles
    assert "['o'] <b onclick=\"x\"> [not executed]" in p.text_rows()


def test_diff_and_summary_escape_paths_too():
    a = {HOSTILE[0]: 1.0, "w": np.zeros(2)}
    b = {HOSTILE[1]: 1.0, "w": np.zeros(2)}
    for obj in (tt.diff(a, b), tt.summary(a)):
        page = to_html(obj)
        parse(page)
        assert HOSTILE[0] not in page and HOSTILE[1] not in page


@settings(max_examples=40)
@given(
    st.recursive(
        st.one_of(st.none(), st.integers(), st.text(max_size=8), st.just(np.ones(2))),
        lambda kids: st.one_of(
            st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=8), kids, max_size=4)
        ),
        max_leaves=12,
    )
)
def test_any_tree_gives_a_well_formed_fragment(tree):
    p = parse(to_html(tree, depth=2, width=3))
    paths = [str(n.path) for n in tt.view(tree).walk()][1:]
    assert set(p.titles()) <= set(paths)
    if len(paths) <= 3:
        assert p.titles() == paths


# --- width, folding, budgets ---------------------------------------------------------------


def test_wide_nodes_end_with_n_more_and_identical_siblings_fold():
    tree = {
        "wide": {f"k{i}": i for i in range(10, 60)},
        "same": [np.zeros(2, np.float32) for _ in range(300)],
    }
    p = parse(to_html(tree))
    rows = p.text_rows()
    assert "… 30 more" in rows
    assert "[0..255] ×256 f32[2] 512 params · 2.0 KB" in rows
    assert "… 44 more" in rows
    assert rows[1:] == rich_rows(tree)[1:]
    # the rows past `width` are in the closed `… 30 more` fold, while the budget lasts
    everything = p.text_rows(visible_only=False)
    fold = everything.index("… 30 more")
    assert everything[fold + 1 : fold + 31] == [f"['k{i}'] {i}" for i in range(30, 60)]


def _lazy_tree(n_lists: int, per_list: int, reads: list, tmp_path, shapes=(4,)):
    f = tmp_path / "payload.bin"
    f.write_bytes(np.arange(64, dtype=np.float32).tobytes())

    def opener():
        reads.append(1)
        return open(f, "rb")

    shared = [
        LazyArray((shapes[j % len(shapes)],), "float32", str(f), offset=4 * j, opener=opener)
        for j in range(per_list)
    ]
    return {f"m{i:04d}": shared for i in range(n_lists)}


def test_a_million_lazy_leaves_render_small_and_read_nothing(tmp_path):
    reads: list = []
    tree = _lazy_tree(1000, 1000, reads, tmp_path)
    page = to_html(tree)
    p = parse(page)
    assert reads == []
    assert len(page) < 2_000_000
    rows = p.text_rows()
    assert rows[0] == (
        "dict[1000] more than 100,000 leaves: not counted here (tt.summary counts them)"
    )
    assert "['m0000'] list[1000] 4,000 params · 16.0 KB" in rows
    assert "[0..255] ×256 f32[4] 1,024 params · 4.1 KB [lazy]" in rows
    assert "… 980 more" in rows and "… 744 more" in rows


def test_the_row_budget_caps_huge_unfoldable_trees(monkeypatch):
    inner = {f"w{k}": np.zeros(k + 1, np.float32) for k in range(10)}
    mid = {f"n{j:03d}": inner for j in range(100)}
    tree = {f"m{i:03d}": mid for i in range(1000)}  # 1e6 leaf paths
    page = to_html(tree, width=1000)
    p = parse(page)
    assert len(page) < 2_000_000
    drawn = [r for r in p.rows if "tt-more" not in r["cls"]]
    assert len(drawn) == html_tree.ROWS
    assert any(r.startswith("… ") for r in p.text_rows(visible_only=False))
    monkeypatch.setattr(html_tree, "ROWS", 50)
    assert len([r for r in parse(to_html(tree)).rows if "tt-more" not in r["cls"]]) == 50


def test_huge_keys_are_cut_and_the_byte_budget_holds():
    key = "k" * 300_000
    tree = {key: [{f"w{i}_{j}": np.zeros(2) for i in range(20)} for j in range(20)]}
    page = to_html(tree, width=30)  # 422 rows without a budget, each with a 300 KB path
    p = parse(page)
    assert len(page) < 1_500_000
    assert all(len(t) <= 2000 and t.endswith("…") for t in p.titles())
    assert p.tags["button"] == 0  # a cut path would paste wrong: no copy button
    drawn = [r for r in p.rows if "tt-more" not in r["cls"]]
    assert len(drawn) == 1 + html_tree.ROW_BYTES // (250 + 2 * 2000) + 1
    assert "… 20 more" in p.text_rows(visible_only=False)


def test_file_backed_leaves_are_read_only_within_their_budget(tmp_path, monkeypatch):
    reads: list = []
    tree = _lazy_tree(1, 3, reads, tmp_path, shapes=(4, 3, 2))["m0000"]  # 16, 12 and 8 bytes
    p = parse(to_html(tree))
    assert reads == [] and "<i>mean</i>" not in to_html(tree)
    assert "[0] f32[4] 4 params · 16 B [lazy]" in p.text_rows()
    monkeypatch.setattr(html_tree, "LAZY_BYTES", 30)  # the first two leaves' worth
    page = to_html(tree)
    assert len(reads) == 4  # stats read each leaf twice (moments, histogram): two leaves
    assert page.count("<i>mean</i>") == 2


def test_leaf_stats_count_nans_and_infs_and_respect_the_byte_budget(monkeypatch):
    x = np.array([1.0, np.nan, np.inf, 2.0, -np.inf], np.float32)
    page = to_html({"x": x, "big": np.arange(1000, dtype=np.float32)})
    assert "nan 1 · inf 2" in page
    assert "<i>min</i> 1 <i>max</i> 2 <i>mean</i> 1.5 <i>std</i> 0.5" in page
    assert page.count('<svg class="tt-hist"') == 2
    monkeypatch.setattr(html_tree, "STATS_LEAF_BYTES", 1000)
    page = to_html({"x": x, "big": np.arange(1000, dtype=np.float32)})
    assert page.count('<svg class="tt-hist"') == 1
    assert "<svg" not in to_html({"x": x}, stats=False)


def test_a_node_that_fails_to_open_shows_its_error_and_the_rest_renders(real):
    jax = real["jax"]

    class Broken:
        pass

    jax.tree_util.register_pytree_node(
        Broken, lambda b: (_ for _ in ()).throw(RuntimeError("bad <flatten>")), lambda a, c: None
    )
    p = parse(to_html({"ok": np.ones(2), "bad": Broken()}))
    rows = p.text_rows()
    assert "['bad'] Broken ⚠ RuntimeError: bad <flatten>" in rows
    assert "['ok'] f64[2] 2 params · 16 B" in rows


def test_a_node_renders_as_its_subtree(real):
    node = tt.view(real["mlp"]).child("layers").children[1]
    p = parse(to_html(node))
    assert p.text_rows()[0].startswith("[1] Linear 2 leaves 272 params 1.1 KB f32 ×2")
    assert p.titles() == [".layers[1]", ".layers[1].weight", ".layers[1].bias"]


# --- diff, jaxpr, summary, placement -------------------------------------------------------


def test_diff_of_a_real_surgery_is_coloured_like_the_terminal(real):
    d = tt.diff(real["mlp"], real["edited"])
    page = to_html(d)
    p = parse(page)
    assert p.text_rows() == rich_rows(d)[1:]
    assert "4 changes" in page and '<b class="tt-chg">~4 changed</b>' in page
    assert '<span class="tt-m">(1 static, 2 shape, 1 value)</span>' in page
    assert ".layers[2].weight" in p.titles() and ".layers[0].bias" in p.titles()
    changed = next(i for i, (t, a) in enumerate(p.attrs) if a.get("title") == ".layers[2].weight")
    assert p.attrs[changed - 2][1]["class"] == "tt-chg"  # the span around sign and key


def test_diff_signs_for_added_and_removed_and_the_change_limit():
    d = tt.diff({"a": 1, "b": [1, 2], "c": 1.0}, {"b": [1, 2, 3], "c": 2.0, "d": "x"})
    page = to_html(d)
    p = parse(page)
    assert p.text_rows() == rich_rows(d)[1:]
    assert '<span class="tt-add"><span class="tt-sign">+</span>' in page
    assert '<span class="tt-rm"><span class="tt-sign">-</span>' in page
    rows = p.text_rows(visible_only=False)
    assert "- ['a'] int" in rows and "+ ['d'] str" in rows
    assert "· 2 unchanged" in rows
    assert "… 2 more changes" in parse(diff_html(d, limit=2)).text_rows()
    assert "no differences" in to_html(tt.diff({"a": 1}, {"a": 1}))


def test_jaxpr_of_a_real_function_folds_by_depth(real):
    v = real["jaxpr"]
    page = to_html(v, depth=5, width=100)
    p = parse(page)
    rows = p.text_rows(sep="")  # an equation's spans make one line of text
    start = rows.index("equations 22")
    rich = rich_rows(v.render(depth=5, width=100, cost=False))
    eqns = rich[rich.index("equations") + 1 : -1]
    assert rows[start + 1 :] == eqns
    assert "jaxpr" in page and "<b>loss</b>" in page
    paths = p.titles()
    assert paths[:3] == [
        ".args[0].layers[0].weight",
        ".args[0].layers[0].bias",
        ".args[0].layers[1].weight",
    ]
    assert ".args[1]" in paths and ".out" in paths
    shallow = parse(to_html(v, depth=1))
    closed = [r for r in shallow.text_rows(sep="") if "custom_jvp_call" in r]
    assert closed and closed[0].endswith(" call_jaxpr: 2 equations: jit, max")
    hidden = shallow.text_rows(visible_only=False, sep="")
    assert any(r.startswith("q:f32[8,16] = max p 0.0") for r in hidden)


def test_jaxpr_width_folds_the_rest_and_raw_jaxprs_work(real):
    jax, jnp = real["jax"], real["jnp"]
    v = real["jaxpr"]
    p = parse(to_html(v, width=5))
    rows = p.text_rows()
    more = [r for r in rows if r.startswith("… 13 more equations")]
    assert more == [
        "… 13 more equations: add ×2, broadcast_in_dim ×2, dot_general ×2, transpose ×2, "
        "custom_jvp_call, div, +3 more"
    ]
    hidden = p.text_rows(visible_only=False, sep="")
    assert any(r.startswith("bf:f32[] = div be 16.0") for r in hidden)
    raw = jax.make_jaxpr(lambda x: jnp.sin(x) * 2.0)(jnp.ones(3))
    for obj in (raw, raw.jaxpr):
        page = to_html(obj)
        parse(page)
        assert '<span class="tt-prim">sin</span>' in page


def test_summary_table(real):
    page = to_html(tt.summary(real["mlp"], depth=2))
    p = parse(page)
    assert p.titles() == [
        ".layers[0]",
        ".layers[1]",
        ".layers[2]",
        ".activation",
        ".final_activation",
    ]
    rows = re.findall(r"<tr>(.*?)</tr>", page)
    cells = [_norm(re.sub(r"<[^>]+>", " ", r)) for r in rows]
    assert ".layers[1] Linear 2 272 70.5% 1.1 KB float32 ×2" in cells
    assert "total MLP 8 386 100% 1.5 KB float32 ×6" in cells
    w = {"w": np.ones(3)}
    tied = to_html(tt.summary({"a": w["w"], "b": w["w"]}))
    assert "tied: 2 paths share memory ([&#x27;a&#x27;], [&#x27;b&#x27;])" in tied


def test_placement_over_eight_devices(real):
    jax, jnp = real["jax"], real["jnp"]
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((2, 4), ("data", "model"))
    tree = {
        "embed": jax.device_put(jnp.ones((64, 32)), NamedSharding(mesh, P(None, "model"))),
        "proj": jax.device_put(jnp.ones((32, 32)), NamedSharding(mesh, P("data", "model"))),
        "scale": jax.device_put(jnp.ones(32), NamedSharding(mesh, P())),
        "host": np.zeros(4, np.float32),
    }
    page = to_html(tt.placement(tree))
    parse(page)
    for i in range(8):
        assert f'<td class="tt-v">cpu:{i}</td>' in page
    bars = re.findall(r'<span class="tt-bar"><span style="width:([\d.]+)%">', page)
    assert bars == ["100.0"] * 8 + [f"{100 * 16 / 2688:.1f}"]
    assert page.count('<td class="tt-n">2.7 KB</td>') == 8 and "3 leaves" in page
    assert "P(None, &#x27;model&#x27;) on data=2×model=4" in page
    assert "split over data (2): 1 leaf, 4.1 KB · model (4): 2 leaves, 12.3 KB" in page
    titles = parse(page).titles()
    assert titles == ["['embed']", "['host']", "['proj']", "['scale']"]
    tree_page = to_html(tree)
    assert "8 devices: cpu 0-7 + host" in tree_page


def test_the_copy_script_is_self_contained_and_guarded(real):
    page = to_html(real["mlp"])
    script = re.search(r"<script>(.*)</script>", page, re.S).group(1)
    assert "window.__treetoolCopy" in script and "import" not in script
    assert "require(" not in script and "http" not in script
    # buttons are hidden until the script marks the view; CSS is scoped to .treetool
    css = re.search(r"<style>(.*)</style>", page, re.S).group(1)
    assert ".treetool:not([data-tt-js]) .tt-cp{display:none}" in css
    rules = [r for r in re.split(r"}", css) if "{" in r and not r.lstrip().startswith("@")]
    for rule in rules:
        selectors = rule.split("{")[0]
        for sel in selectors.split(","):
            assert ".treetool" in sel, sel
