"""Framework conventions: how each framework lays out a weight, used to break ties.

torch and equinox keep a Linear weight as `(out, in)` and a conv kernel as `(O, I, *k)` (the
layout `"oi"`); flax (linen and nnx) and haiku keep `(in, out)` and `(*k, I, O)` (`"io"`), and
so does GPT-2's `Conv1D` (`c_attn`, `c_fc`, `c_proj`). Embeddings, norms and biases have one
layout everywhere (`"plain"`). Transposed convolutions have their own layouts (see
`_transforms.conv_transpose_steps`): torch `(I, O, *k)` (`"ct_torch"`), equinox `(O, I, *k)`
(`"ct_oi"`) and flax linen `(*k, I, O)` (`"ct_io"`), told by a module name (`ConvTranspose_0`,
`conv_transpose`, `deconv`) or, for an equinox target, by the module's type; a torch weight
(`"oi"`) going into a transposed conv is taken as torch's `ConvTranspose` layout. A transform that changes the layout is chosen exactly when the
two sides' layouts differ; a square matrix is never decided by its shape alone.
"""

from __future__ import annotations

__all__ = ["layout", "out_axis"]

_EMBEDDING_WORDS = frozenset(
    {"emb", "embed", "embedding", "embeddings", "wte", "wpe", "embed_tokens", "tok_embeddings"}
)
_CONV1D = frozenset({"c_attn", "c_fc", "c_proj"})


def layout(keys: tuple[str, ...], ndim: int) -> str:
    """`"oi"`, `"io"` or `"plain"` for a leaf named by `keys` with `ndim` axes.

    Example:
        >>> layout(("layers", "0", "weight"), 2), layout(("Dense_0", "kernel"), 2)
        ('oi', 'io')
        >>> layout(("h", "0", "attn", "c_attn", "weight"), 2), layout(("wte", "weight"), 2)
        ('io', 'plain')
        >>> layout(("params", "ConvTranspose_0", "kernel"), 4), layout(("up", "deconv", "weight"), 4)
        ('ct_io', 'ct_torch')
    """
    if ndim < 2 or not keys:
        return "plain"
    last = keys[-1].lower()
    if last in ("value", "raw_value") and len(keys) > 1:  # nnx Variable
        keys = keys[:-1]
        last = keys[-1].lower()
    words = {k.lower() for k in keys[:-1]}
    for k in keys[:-1]:
        words.update(k.lower().split("_"))
    if last == "embedding" or words & _EMBEDDING_WORDS:
        return "plain"
    if ndim >= 3 and any(_is_conv_transpose(k) for k in keys[:-1]):
        if last == "kernel":
            return "ct_io"
        if last == "weight":
            return "ct_torch"
    if last in ("kernel", "w"):
        return "io"
    if len(keys) >= 2 and keys[-2].lower() in _CONV1D:
        return "io"
    if last in ("weight", "in_proj_weight"):
        return "oi"
    return "plain"


def _is_conv_transpose(key: str) -> bool:
    k = key.lower().replace("_", "")
    return k.startswith(("convtranspose", "deconv"))


def out_axis(layout_: str, ndim: int) -> int:
    """The axis of output features (where fused projections are split).

    Example:
        >>> out_axis("oi", 2), out_axis("io", 2), out_axis("plain", 1)
        (0, 1, 0)
    """
    if layout_ == "io":
        return ndim - 1
    return 0
