"""`--json` output of the `treetool` commands: the leaf listing and the JSON printer."""

from __future__ import annotations

import sys
from typing import Any

from . import _cli_files as _files
from . import _cli_targets as _targets


class _Records(list):
    """Leaf records already encoded as JSON text, one per leaf (see `_print_json`)."""


def _json_listing(tree: Any, fmt: str, pattern: str | None) -> dict[str, Any]:
    """The `inspect --json` / `ls --json` object; one pass over the leaves without a filter."""
    from ._arrays import LazyArray, leaf_info
    from ._callables import callable_identity
    from ._model import Unopened, aggregate, no_gc

    with no_gc():
        if pattern:
            from ._views import find, unopened_or_leaf

            found = find(tree, pattern, leaves_only=True)
            chunks: Any = [[(str(p), unopened_or_leaf(x)) for p, x in found]]
        else:  # only the text of each path is needed: the walk makes no Path objects
            from ._views import leaf_text_chunks

            chunks = leaf_text_chunks(tree, errors=True)  # a broken node: an "error" entry
        from json.encoder import encode_basestring as q

        import numpy as np

        records, seen = _Records(), set()
        append, add = records.append, seen.add
        leaves = params = nbytes = errors = 0
        # numpy and lazy (file) leaves of one type, shape and dtype share the tail of their
        # record and their counts: their facts depend on nothing else
        tails: dict[tuple[Any, Any, Any], tuple[str, int, int]] = {}
        same_facts = {np.ndarray}
        with_sharding: set[type] = set()  # lazy leaf types that carry a recorded sharding
        shard_texts: dict[int, str] = {}
        in_shards = fmt == "sharded"  # a sharded set: each leaf names the file holding it
        for chunk in chunks:
            leaves += len(chunk)
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
                    key = (t, x.shape, x.dtype)
                    facts = tails.get(key) or _lazy_tail(tails, key, x)
                    append(f'{{"path": {q(text)}, "sharding": {st}, {facts[0]}')
                    if id(x) not in seen:
                        add(id(x))
                        params += facts[1]
                        nbytes += facts[2]
                    continue
                if t in same_facts:
                    key = (t, x.shape, x.dtype)
                    facts = tails.get(key)
                    if facts is None:
                        info = leaf_info(x)
                        dims = ", ".join(map(str, info.shape))
                        tail = (
                            f'"shape": [{dims}], "dtype": {q(info.dtype)}, '
                            f'"nbytes": {info.nbytes}, "device": {q(info.device)}, '
                            f'"type": {q(info.type_name)}}}'
                        )
                        facts = tails[key] = (tail, info.params, info.nbytes)
                    if in_shards and isinstance(x, LazyArray):  # where its bytes live
                        append(
                            f'{{"path": {q(text)}, "shard": {q(x.file)}, '
                            f'"offset": {x.offset}, {facts[0]}'
                        )
                    else:
                        append(f'{{"path": {q(text)}, {facts[0]}')
                    if id(x) not in seen:  # tied arrays count once
                        add(id(x))
                        params += facts[1]
                        nbytes += facts[2]
                    continue
                if t is Unopened:  # a node whose flatten raised: its message at its path
                    append(f'{{"path": {q(text)}, "error": {q(x.error)}}}')
                    errors += 1
                    continue
                info = leaf_info(x)
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
                    f'{{"path": {q(text)}, "shape": [{dims}], "dtype": {q(info.dtype)}, '
                    f'"nbytes": {info.nbytes}, "device": {device}, "type": {q(info.type_name)}}}'
                )
                if id(x) not in seen:  # tied arrays count once
                    add(id(x))
                    params += info.params
                    nbytes += info.nbytes
        totals = {"leaves": leaves - errors, "params": params, "bytes": nbytes}
        if errors:
            totals["errors"] = errors
        if pattern:
            try:
                agg = aggregate(tree)
                totals = {"leaves": agg.leaves, "params": agg.params, "bytes": agg.nbytes}
            except Exception:  # a node whose flatten raises: the summary's tolerant count
                from ._summary import summary

                t = summary(tree, depth=0).total
                totals = {"leaves": t.leaves, "params": t.params, "bytes": t.nbytes}
                totals["errors"] = t.errors
    return {"format": fmt, **_files.file_facts(tree), "totals": totals, "leaves": records}


def _lazy_tail(tails: dict, key: tuple, x: Any) -> tuple[str, int, int]:
    """The shared end of a numpy/lazy leaf's JSON record, and its params and bytes."""
    from json.encoder import encode_basestring as q

    from ._arrays import leaf_info

    info = leaf_info(x)
    dims = ", ".join(map(str, info.shape))
    tail = (
        f'"shape": [{dims}], "dtype": {q(info.dtype)}, '
        f'"nbytes": {info.nbytes}, "device": {q(info.device)}, '
        f'"type": {q(info.type_name)}}}'
    )
    facts = tails[key] = (tail, info.params, info.nbytes)
    return facts


def _json_text(x: Any) -> str:
    import json

    return json.dumps(x, default=_json_default, separators=(", ", ": "))


def _print_json(data: Any) -> None:
    """Indented JSON; a leaf listing is written one compact record per line."""
    import json

    if _targets._KEEP is not None:
        _targets._KEEP.append(data)

    out = sys.stdout
    leaves = data.get("leaves") if isinstance(data, dict) else None
    if not isinstance(leaves, _Records):
        json.dump(data, out, indent=2, default=_json_default)
        out.write("\n")
        return
    head = {k: v for k, v in data.items() if k != "leaves"}
    text = json.dumps(head, indent=2, default=_json_default)
    out.write(text[:-2] + ',\n  "leaves": [')
    out.write(",".join("\n    " + r for r in leaves))
    out.write("\n  ]\n}\n" if leaves else "]\n}\n")


def _json_default(x: Any) -> Any:
    if hasattr(x, "tolist"):
        return x.tolist()
    if hasattr(x, "to_dict"):
        return x.to_dict()
    return repr(x)
