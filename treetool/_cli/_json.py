"""`--json` output of the `treetool` commands: the leaf listing and the JSON printer."""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Any

from treetool._cli._target import keep
from treetool._leaves._dtypes import loaded_numpy

if TYPE_CHECKING:
    from treetool._leaves._arrays import LeafInfo


class _Records(list):
    """Leaf records already encoded as JSON text, one per leaf (see `_print_json`)."""


def _json_listing(
    tree: Any,
    fmt: str,
    pattern: str | None,
    pairs: list[tuple[str, Any]] | None = None,
    *,
    file_facts: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The `inspect --json` / `ls --json` object; one pass over the leaves without a filter.
    `pairs` (path text, leaf): the leaves `ls --search` found, listed instead of the tree's.
    `file_facts`: what the file says about itself (`Target.facts`), after the format."""
    from treetool._leaves._arrays import LazyArray, leaf_info
    from treetool._leaves._callables import callable_identity
    from treetool._tree._model import Unopened, no_gc
    from treetool._tree._totals import Tally, totals

    with no_gc():
        if pairs is not None:
            chunks: Any = [pairs]
        elif pattern:
            from treetool._tree._views import find, unopened_or_leaf

            found = find(tree, pattern, leaves_only=True)
            chunks = [[(str(p), unopened_or_leaf(x)) for p, x in found]]
        else:  # only the text of each path is needed: the walk makes no Path objects
            from treetool._tree._views import leaf_text_chunks

            chunks = leaf_text_chunks(tree, errors=True)  # a broken node: an "error" entry
        from json.encoder import encode_basestring as q

        np = loaded_numpy()  # no numpy imported: no numpy array exists

        records, tally = _Records(), Tally()
        append, count = records.append, tally.add_sized  # tied arrays count once
        # numpy and lazy (file) leaves of one type, shape and dtype share the tail of their
        # record and their facts: their facts depend on nothing else
        tails: dict[tuple[Any, Any, Any], tuple[str, LeafInfo]] = {}
        np_ndarray = np.ndarray if np is not None else None
        same_facts: set[type] = {np_ndarray} if np_ndarray is not None else set()
        with_sharding: set[type] = set()  # lazy leaf types that carry a recorded sharding
        shard_texts: dict[int, str] = {}
        in_shards = fmt == "sharded"  # a sharded set: each leaf names the file holding it
        for chunk in chunks:
            for text, x in chunk:
                t = type(x)
                if t not in same_facts and issubclass(t, LazyArray):
                    same_facts.add(t)
                    if "sharding" in getattr(t, "__slots__", ()):
                        with_sharding.add(t)
                if t in with_sharding and x.sharding is not None:
                    st = shard_texts.get(id(x.sharding))
                    if st is None:
                        st = shard_texts[id(x.sharding)] = _json_text(x.sharding)
                    key = (t, x.shape, x.dtype_name)
                    facts = tails.get(key) or _lazy_tail(tails, key, x)
                    append(f'{{"path": {q(text)}, "sharding": {st}, {facts[0]}')
                    count(x, facts[1])
                    continue
                if t in same_facts:
                    # a LazyArray's dtype name: its numpy dtype is made only when needed
                    key = (t, x.shape, x.dtype_name if t is not np_ndarray else x.dtype)
                    facts = tails.get(key) or _lazy_tail(tails, key, x)
                    if in_shards and isinstance(x, LazyArray):  # where its bytes live
                        append(
                            f'{{"path": {q(text)}, "shard": {q(x.file)}, '
                            f'"offset": {x.offset}, {facts[0]}'
                        )
                    else:
                        append(f'{{"path": {q(text)}, {facts[0]}')
                    count(x, facts[1])
                    continue
                if t is Unopened:  # a node whose flatten raised: its message at its path
                    append(f'{{"path": {q(text)}, "error": {q(x.error)}}}')
                    tally.error(text, x.error)
                    continue
                info = leaf_info(x)
                count(x, info)
                shape = info.shape
                if shape is None:
                    fn = callable_identity(x)  # a function leaf: its label (jax.nn.relu)
                    named = f', "function": {q(fn[3])}' if fn is not None else ""
                    append(
                        f'{{"path": {q(text)}, "shape": null, "dtype": null, "nbytes": 0, '
                        f'"device": null, "type": {q(info.type_name)}{named}}}'
                    )
                    continue
                dims = ", ".join(map(str, shape))
                device = "null" if info.device is None else q(info.device)
                append(
                    f'{{"path": {q(text)}, "shape": [{dims}], "dtype": {q(info.dtype or "")}, '
                    f'"nbytes": {info.nbytes}, "device": {device}, "type": {q(info.type_name)}}}'
                )
        # with a filter, the totals are still the whole tree's
        agg = totals(tree) if pattern or pairs is not None else tally.finish(breakdown=False)
        counts = {"leaves": agg.leaves, "params": agg.params, "bytes": agg.nbytes}
        if agg.errors:
            counts["errors"] = agg.errors
    return {"format": fmt, **(file_facts or {}), "totals": counts, "leaves": records}


def _lazy_tail(tails: dict, key: tuple, x: Any) -> tuple[str, LeafInfo]:
    """The shared end of a numpy/lazy leaf's JSON record, and its facts."""
    from json.encoder import encode_basestring as q

    from treetool._leaves._arrays import leaf_info

    info = leaf_info(x)  # an array: shape, dtype and device are never None here
    dims = ", ".join(map(str, info.shape or ()))
    tail = (
        f'"shape": [{dims}], "dtype": {q(info.dtype or "")}, '
        f'"nbytes": {info.nbytes}, "device": {q(info.device or "")}, '
        f'"type": {q(info.type_name)}}}'
    )
    facts = tails[key] = (tail, info)
    return facts


def _json_text(x: Any) -> str:
    import json

    return json.dumps(x, default=_json_default, separators=(", ", ": "))


def _print_json(data: Any) -> None:
    """Indented JSON; a leaf listing is written one compact record per line."""
    import json

    keep(data)

    from treetool._text import redact_urls  # URLs' user info and query values hidden, as everywhere

    out = _Out(sys.stdout)
    leaves = data.get("leaves") if isinstance(data, dict) else None
    if not isinstance(leaves, _Records):
        out.write(redact_urls(json.dumps(data, indent=2, default=_json_default)))
        out.write("\n")
        return
    head = {k: v for k, v in data.items() if k != "leaves"}
    text = redact_urls(json.dumps(head, indent=2, default=_json_default))
    out.write(text[:-2] + ',\n  "leaves": [')
    out.write(",".join("\n    " + (redact_urls(r) if "://" in r else r) for r in leaves))
    out.write("\n  ]\n}\n" if leaves else "]\n}\n")


_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_surrogates(text: str) -> str:
    r"""`text` with every lone surrogate (a name a file made of bytes that are not UTF-8)
    written as its JSON escape: valid JSON that any UTF-8 stream can carry, and that a JSON
    reader turns back into the same string.

    Example:
        >>> import json
        >>> s = escape_surrogates(json.dumps("a\udc80b", ensure_ascii=False))
        >>> s, json.loads(s) == "a\udc80b"
        ('"a\\udc80b"', True)
    """
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class _Out:
    """stdout for JSON: lone surrogates escaped (they occur only inside JSON strings)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def write(self, text: str) -> None:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = escape_surrogates(text)
        self.stream.write(text)


def _json_default(x: Any) -> Any:
    if hasattr(x, "tolist"):
        return x.tolist()
    if hasattr(x, "to_dict"):
        return x.to_dict()
    return repr(x)
