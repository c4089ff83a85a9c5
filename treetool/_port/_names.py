"""Name normalisation: a leaf's path as tokens that two frameworks can agree on.

`layers.0.self_attn.q_proj.weight`, `.layers[0].attn.query_proj.weight` and
`['params']['layers_0']['attn']['query']['kernel']` all become the module tokens
`('layers', 0, 'attn', 'q')` and the role `weight`: keys are split on `. / _ - [ ]` and
spaces, lower-cased, numbers become ints, synonyms map to one word and filler words (`proj`,
`self`, `running`, ...) and wrappers (`model.`, `params/`, nnx `.value`) are dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["DROPPED", "Leaf", "dropped_reason", "fused_parts", "module_tokens_of", "tokens"]

_SPLIT = re.compile(r"[./_\-\[\]\s~:]+")

#: token -> the word both sides are compared by
SYNONYMS: dict[str, str] = {
    # a parameter's role
    "kernel": "weight",
    "scale": "weight",
    "embedding": "weight",
    "gamma": "weight",
    "w": "weight",
    "beta": "bias",
    "b": "bias",
    "offset": "bias",
    "variance": "var",
    # attention projections
    "query": "q",
    "wq": "q",
    "key": "k",
    "wk": "k",
    "value": "v",
    "wv": "v",
    "output": "out",
    "o": "out",
    "wo": "out",
    # repeated blocks and embeddings
    "layer": "layers",
    "blocks": "layers",
    "block": "layers",
    "h": "layers",
    "embed": "emb",
    "embeddings": "emb",
    "wte": "emb",
    "tok": "emb",
}

#: a whole last key -> the role it plays: learned-activation parameters (torch `PReLU.weight`
#: is flax / equinox `PReLU.negative_slope`, elsewhere `alpha` or `slope`)
ROLE_KEYS: dict[str, str] = {
    "negative_slope": "weight",
    "alpha": "weight",
    "slope": "weight",
    "prelu_alpha": "weight",
}

#: words that carry no meaning across frameworks
FILLER = frozenset({"proj", "self", "running", "moving", "to", "c", "attention"})

#: leading keys that wrap a model (dropped before comparing)
WRAPPERS = frozenset({"model", "params", "module", "batch_stats", "variables", "base_model"})

ROLES = frozenset({"weight", "bias", "mean", "var"})

#: source entries dropped on purpose: last key -> why
DROPPED: dict[str, str] = {
    "num_batches_tracked": "BatchNorm's step counter (no JAX model keeps one)",
    "inv_freq": "rotary frequencies (recomputed by the model)",
    "masked_bias": "attention mask constant (a buffer, not a weight)",
}


def dropped_reason(keys: tuple[str, ...], shape: tuple[int, ...]) -> str | None:
    """Why a source entry is dropped on purpose, or None."""
    last = keys[-1].lower() if keys else ""
    if last in DROPPED:
        return DROPPED[last]
    if last == "bias" and len(shape) == 4 and shape[:2] == (1, 1) and shape[2] == shape[3]:
        return "causal mask buffer (GPT-2 attn.bias), not a weight"
    return None


_NUMBERED = re.compile(r"^([a-z]+)(\d+)$")


def _split(text: str) -> list[str | int]:
    """`Dense_0` -> `['dense', 0]`; a trailing number is an index (`fc1` -> `['fc', 1]`)."""
    out: list[str | int] = []
    for part in _SPLIT.split(text):
        if not part:
            continue
        if part.isdigit():
            out.append(int(part))
            continue
        part = part.lower()
        m = _NUMBERED.match(part)
        if m is not None and len(m.group(2)) < 8:
            out += [m.group(1), int(m.group(2))]
        else:
            out.append(part)
    return out


def tokens(keys: tuple[str, ...]) -> tuple[str | int, ...]:
    """The normalised tokens of a path given as its keys' texts.

    Example:
        >>> tokens(("model", "layers", "0", "self_attn", "q_proj", "weight"))
        ('layers', 0, 'attn', 'q', 'weight')
        >>> tokens(("params", "Dense_1", "kernel"))
        ('dense', 1, 'weight')
        >>> tokens(("blocks", "0", "fc1", "weight"))
        ('layers', 0, 'fc', 1, 'weight')
        >>> tokens(("prelu1", "negative_slope")), tokens(("prelu1", "weight"))
        (('prelu', 1, 'weight'), ('prelu', 1, 'weight'))
    """
    keys = strip_wrappers(keys)
    out: list[str | int] = []
    last = len(keys) - 1
    for n, key in enumerate(keys):
        role = ROLE_KEYS.get(key.lower()) if n == last and n > 0 else None
        if role is not None:
            out.append(role)
            continue
        for t in _split(key):
            if isinstance(t, str):
                t = SYNONYMS.get(t, t)
                if t in FILLER:
                    continue
            out.append(t)
    return tuple(out)


def strip_wrappers(keys: tuple[str, ...]) -> tuple[str, ...]:
    """`keys` without leading wrappers (`model`, `params`, ...) and nnx's trailing `value`."""
    if len(keys) > 1 and keys[-1] in ("value", "raw_value"):
        keys = keys[:-1]
    i = 0
    while i < len(keys) - 1 and keys[i].lower() in WRAPPERS:
        i += 1
    return keys[i:]


def module_tokens_of(toks: tuple[str | int, ...]) -> tuple[tuple[str | int, ...], str]:
    """(module tokens, role) of a leaf's tokens: the role is the last token.

    Example:
        >>> module_tokens_of(("layers", 0, "attn", "q", "weight"))
        (('layers', 0, 'attn', 'q'), 'weight')
    """
    if not toks:
        return (), ""
    return toks[:-1], str(toks[-1])


#: a fused projection: (matcher on the keys) -> part names; see `fused_parts`
_QKV = ("q", "k", "v")


def fused_parts(
    keys: tuple[str, ...],
) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]] | None:
    """The parts a fused projection holds: (part names, the keys of each part), or None.

    torch `in_proj_weight`/`in_proj_bias` (nn.MultiheadAttention), GPT-2 `c_attn`, `qkv`,
    `qkv_proj`, `wqkv` (q, k, v in that order) and `gate_up_proj` (gate, up).

    Example:
        >>> fused_parts(("attn", "in_proj_weight"))
        (('q', 'k', 'v'), (('attn', 'q', 'weight'), ('attn', 'k', 'weight'), ('attn', 'v', 'weight')))
    """
    if not keys:
        return None
    last = keys[-1].lower()
    if last in ("in_proj_weight", "in_proj_bias"):
        role = last.rsplit("_", 1)[1]
        return _QKV, tuple((*keys[:-1], p, role) for p in _QKV)
    if len(keys) >= 2:
        mod = keys[-2].lower()
        if mod in ("c_attn", "qkv", "qkv_proj", "wqkv"):
            return _QKV, tuple((*keys[:-2], p, keys[-1]) for p in _QKV)
        if mod in ("gate_up_proj", "gate_up"):
            return ("gate", "up"), tuple((*keys[:-2], p, keys[-1]) for p in ("gate", "up"))
    return None


@dataclass
class Leaf:
    """One side's leaf (or one part of a fused one), as matching sees it."""

    name: str  # source: dotted name; target: keystr
    keys: tuple[str, ...]  # the keys' texts (a fused part: the part's virtual keys)
    shape: tuple[int, ...]
    dtype: str
    layout: str  # "oi" (torch, equinox), "io" (flax, haiku, GPT-2 Conv1D) or "plain"
    part: tuple[int, int, int] | None = None  # (axis, i, n) of a fused leaf
    index_at: tuple[int, ...] = ()  # positions in `keys` of the numbers (for folding)

    @property
    def tokens(self) -> tuple[str | int, ...]:
        return tokens(self.keys)
