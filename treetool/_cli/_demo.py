"""The built-in example of `treetool demo`: a small equinox transformer and its adamw state."""

from __future__ import annotations

from typing import Any

__all__ = ["TinyTransformer", "demo_tree"]


def _model_classes() -> Any:
    import equinox as eqx
    import jax

    class Block(eqx.Module):
        """Pre-norm attention and MLP, as in a GPT block."""

        norm1: eqx.nn.LayerNorm
        attn: eqx.nn.MultiheadAttention
        norm2: eqx.nn.LayerNorm
        mlp: eqx.nn.MLP

        def __init__(self, dim: int, heads: int, key: jax.Array) -> None:
            k1, k2 = jax.random.split(key)
            self.norm1 = eqx.nn.LayerNorm(dim)
            self.attn = eqx.nn.MultiheadAttention(heads, dim, key=k1)
            self.norm2 = eqx.nn.LayerNorm(dim)
            self.mlp = eqx.nn.MLP(dim, dim, 4 * dim, 1, key=k2)

    class TinyTransformer(eqx.Module):
        """Token embedding, a stack of blocks, a final norm and an unembedding."""

        embed: eqx.nn.Embedding
        blocks: list
        norm: eqx.nn.LayerNorm
        head: eqx.nn.Linear
        vocab: int = eqx.field(static=True)

        def __init__(self, vocab: int, dim: int, depth: int, heads: int, key: jax.Array) -> None:
            keys = jax.random.split(key, depth + 2)
            self.vocab = vocab
            self.embed = eqx.nn.Embedding(vocab, dim, key=keys[0])
            self.blocks = [Block(dim, heads, k) for k in keys[1:-1]]
            self.norm = eqx.nn.LayerNorm(dim)
            self.head = eqx.nn.Linear(dim, vocab, use_bias=False, key=keys[-1])

    return TinyTransformer


def TinyTransformer(
    vocab: int = 64, dim: int = 16, depth: int = 4, heads: int = 2, seed: int = 0
) -> Any:
    """A small but real equinox transformer.

    The structure is traced abstractly and filled with seeded numpy values (scaled like the
    layers' own initialisers; norms start at ones and zeros), which avoids compiling every initialiser op-by-op: the model is
    ready in a fraction of a second.
    """
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np

    cls = _model_classes()
    shapes = eqx.filter_eval_shape(cls, vocab, dim, depth, heads, jax.random.key(seed))
    rng = np.random.default_rng(seed)

    def fill(path: Any, x: Any) -> Any:
        if not isinstance(x, jax.ShapeDtypeStruct):
            return x
        name = jax.tree_util.keystr(path[-1:])
        if x.ndim == 1 and name in (".weight", ".bias"):  # norms: ones and zeros; biases: zeros
            is_norm_weight = name == ".weight"
            return jnp.ones(x.shape, x.dtype) if is_norm_weight else jnp.zeros(x.shape, x.dtype)
        fan_in = x.shape[-1] if x.ndim >= 2 else 1
        scale = 1.0 / np.sqrt(fan_in)
        return jnp.asarray(rng.uniform(-scale, scale, x.shape).astype(x.dtype))

    return jax.tree_util.tree_map_with_path(fill, shapes)


def demo_tree() -> dict[str, Any]:
    """`{"model": TinyTransformer, "opt_state": adamw state}`: what `treetool demo` shows.

    optax comes with `treetool[demo]`; without it, a one-line `TreetoolError` says so.
    """
    import equinox as eqx

    try:
        import optax
    except ImportError:
        from treetool._errors import TreetoolError

        raise TreetoolError(
            "treetool demo shows an optax optimizer state and needs optax "
            "(pip install 'treetool[demo]')"
        ) from None

    model = TinyTransformer()
    opt_state = optax.adamw(1e-3).init(eqx.filter(model, eqx.is_array))
    return {"model": model, "opt_state": opt_state}
