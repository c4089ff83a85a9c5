"""Real torch models and their JAX counterparts (equinox, flax linen, flax nnx), for the port tests.

Each torch model is built with a fixed seed; `state_dict_numpy` gives its state_dict as numpy
arrays (what the PyTorch reader will give, and what safetensors.torch writes).
"""

from __future__ import annotations

import math
from typing import Any

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import torch
from flax import nnx

E, H, V, T = 16, 4, 50, 7  # width, heads, vocabulary, sequence length


def state_dict_numpy(m: torch.nn.Module) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}


def torch_out(m: torch.nn.Module, *args: Any) -> np.ndarray:
    with torch.no_grad():
        return m(*[torch.as_tensor(a) for a in args]).numpy()


def max_err(a: Any, b: Any) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float32) - np.asarray(b, np.float32))))


# --- MLP ----------------------------------------------------------------------------------


def torch_mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 4), torch.nn.ReLU(),
        torch.nn.Linear(4, 2),
    ).eval()  # fmt: skip


class LinenMLP(nn.Module):
    @nn.compact
    def __call__(self, x: Any) -> Any:
        x = nn.relu(nn.Dense(5)(x))
        x = nn.relu(nn.Dense(4)(x))
        return nn.Dense(2)(x)


# --- CNN with BatchNorm --------------------------------------------------------------------


def torch_cnn() -> torch.nn.Module:
    torch.manual_seed(0)
    m = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10),
    )  # fmt: skip
    m.train()
    with torch.no_grad():  # running statistics that are not the initial 0 and 1
        for _ in range(3):
            m(torch.randn(4, 3, 8, 8) * 2 + 0.5)
    return m.eval()


class LinenCNN(nn.Module):
    @nn.compact
    def __call__(self, x: Any) -> Any:
        for f in (8, 16):
            x = nn.Conv(f, (3, 3), padding=1)(x)
            x = nn.BatchNorm(use_running_average=True, epsilon=1e-5)(x)
            x = nn.relu(x)
        return nn.Dense(10)(x.mean(axis=(1, 2)))


class NnxCNN(nnx.Module):
    def __init__(self, rngs: nnx.Rngs) -> None:
        self.conv1 = nnx.Conv(3, 8, (3, 3), padding=1, rngs=rngs)
        self.bn1 = nnx.BatchNorm(8, use_running_average=True, epsilon=1e-5, rngs=rngs)
        self.conv2 = nnx.Conv(8, 16, (3, 3), padding=1, rngs=rngs)
        self.bn2 = nnx.BatchNorm(16, use_running_average=True, epsilon=1e-5, rngs=rngs)
        self.head = nnx.Linear(16, 10, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        x = nnx.relu(self.bn1(self.conv1(x)))
        x = nnx.relu(self.bn2(self.conv2(x)))
        return self.head(x.mean(axis=(1, 2)))


# --- a transformer layer: MultiheadAttention (fused in_proj), LayerNorm, Embedding ---------


class TorchLayer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(V, E)
        self.attn = torch.nn.MultiheadAttention(E, H, batch_first=True)
        self.norm1 = torch.nn.LayerNorm(E)
        self.ff1 = torch.nn.Linear(E, 4 * E)
        self.ff2 = torch.nn.Linear(4 * E, E)
        self.norm2 = torch.nn.LayerNorm(E)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids)
        x = self.norm1(x + self.attn(x, x, x, need_weights=False)[0])
        return self.norm2(x + self.ff2(torch.relu(self.ff1(x))))


def torch_layer(seed: int = 0) -> TorchLayer:
    torch.manual_seed(seed)
    m = TorchLayer().eval()
    with torch.no_grad():  # biases that are not zero, norms that are not 1 and 0
        for name, p in m.named_parameters():
            if "bias" in name or "norm" in name:
                p.add_(torch.randn_like(p) * 0.3)
    return m


class EqxLayer(eqx.Module):
    emb: eqx.nn.Embedding
    attn: eqx.nn.MultiheadAttention
    norm1: eqx.nn.LayerNorm
    ff1: eqx.nn.Linear
    ff2: eqx.nn.Linear
    norm2: eqx.nn.LayerNorm

    def __init__(self, key: Any) -> None:
        k = jax.random.split(key, 4)
        self.emb = eqx.nn.Embedding(V, E, key=k[0])
        bias = dict(use_query_bias=True, use_key_bias=True, use_value_bias=True)
        self.attn = eqx.nn.MultiheadAttention(H, E, use_output_bias=True, **bias, key=k[1])
        self.norm1 = eqx.nn.LayerNorm(E)
        self.ff1 = eqx.nn.Linear(E, 4 * E, key=k[2])
        self.ff2 = eqx.nn.Linear(4 * E, E, key=k[3])
        self.norm2 = eqx.nn.LayerNorm(E)

    def __call__(self, ids: Any) -> Any:
        x = jax.vmap(self.emb)(ids)
        x = jax.vmap(self.norm1)(x + self.attn(x, x, x))
        h = jax.vmap(self.ff2)(jax.nn.relu(jax.vmap(self.ff1)(x)))
        return jax.vmap(self.norm2)(x + h)


class LinenLayer(nn.Module):
    """The same layer in flax linen: attention kernels are `(E, H, D)` and `(H, D, E)`."""

    @nn.compact
    def __call__(self, ids: Any) -> Any:
        x = nn.Embed(V, E, name="emb")(ids)
        a = nn.MultiHeadDotProductAttention(num_heads=H, name="attn")(x, x)
        x = nn.LayerNorm(epsilon=1e-5, name="norm1")(x + a)
        h = nn.Dense(E, name="ff2")(nn.relu(nn.Dense(4 * E, name="ff1")(x)))
        return nn.LayerNorm(epsilon=1e-5, name="norm2")(x + h)


# --- a ModuleList of identical layers, and one scan-stacked equinox layer -----------------

N_BLOCKS = 4


class TorchBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin1 = torch.nn.Linear(E, 2 * E)
        self.lin2 = torch.nn.Linear(2 * E, E)
        self.norm = torch.nn.LayerNorm(E)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.lin2(torch.tanh(self.lin1(x))))


class TorchStack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([TorchBlock() for _ in range(N_BLOCKS)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def torch_stack() -> TorchStack:
    torch.manual_seed(0)
    return TorchStack().eval()


class EqxBlock(eqx.Module):
    lin1: eqx.nn.Linear
    lin2: eqx.nn.Linear
    norm: eqx.nn.LayerNorm

    def __init__(self, key: Any) -> None:
        a, b = jax.random.split(key)
        self.lin1 = eqx.nn.Linear(E, 2 * E, key=a)
        self.lin2 = eqx.nn.Linear(2 * E, E, key=b)
        self.norm = eqx.nn.LayerNorm(E)

    def __call__(self, x: Any) -> Any:
        return self.norm(x + self.lin2(jnp.tanh(self.lin1(x))))


class EqxScan(eqx.Module):
    """N blocks stacked on a leading axis (one `EqxBlock` whose leaves are `(N, ...)`), run
    by `jax.lax.scan`."""

    layers: EqxBlock

    def __init__(self, key: Any) -> None:
        self.layers = eqx.filter_vmap(EqxBlock)(jax.random.split(key, N_BLOCKS))

    def __call__(self, x: Any) -> Any:
        dynamic, static = eqx.partition(self.layers, eqx.is_array)

        def step(x: Any, d: Any) -> tuple[Any, None]:
            return eqx.combine(d, static)(x), None

        return jax.lax.scan(step, x, dynamic)[0]


# --- GPT-2 style: Conv1D layers (weights stored (in, out)), fused c_attn ------------------


class Conv1D(torch.nn.Module):
    """Hugging Face's GPT-2 `Conv1D`: a Linear whose weight is stored `(in, out)`."""

    def __init__(self, nf: int, nx: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(nx, nf) * 0.2)
        self.bias = torch.nn.Parameter(torch.randn(nf) * 0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight + self.bias


class GPT2Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c_attn = Conv1D(3 * E, E)
        self.c_proj = Conv1D(E, E)
        self.register_buffer("bias", torch.tril(torch.ones(T, T)).view(1, 1, T, T))
        self.register_buffer("masked_bias", torch.tensor(-1e4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = self.c_attn(x).split(E, dim=2)
        q, k, v = (y.view(b, t, H, E // H).transpose(1, 2) for y in (q, k, v))
        w = q @ k.transpose(-1, -2) / math.sqrt(E // H)
        w = w.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf")).softmax(-1)
        return self.c_proj((w @ v).transpose(1, 2).reshape(b, t, E))


class GPT2MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c_fc = Conv1D(4 * E, E)
        self.c_proj = Conv1D(E, 4 * E)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(torch.nn.functional.gelu(self.c_fc(x), approximate="tanh"))


class GPT2Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(E)
        self.attn = GPT2Attention()
        self.ln_2 = torch.nn.LayerNorm(E)
        self.mlp = GPT2MLP()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TorchGPT2(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wte = torch.nn.Embedding(V, E)
        self.wpe = torch.nn.Embedding(T, E)
        self.h = torch.nn.ModuleList([GPT2Block() for _ in range(2)])
        self.ln_f = torch.nn.LayerNorm(E)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


def torch_gpt2() -> TorchGPT2:
    torch.manual_seed(0)
    return TorchGPT2().eval()


class LinenGPT2Block(nn.Module):
    """q, k and v as three Dense layers (GPT-2 fuses them in `c_attn`)."""

    @nn.compact
    def __call__(self, x: Any) -> Any:
        b, t, _ = x.shape
        y = nn.LayerNorm(epsilon=1e-5, name="ln_1")(x)
        q, k, v = (nn.Dense(E, name=n)(y) for n in ("attn_query", "attn_key", "attn_value"))
        q, k, v = (z.reshape(b, t, H, E // H).transpose(0, 2, 1, 3) for z in (q, k, v))
        w = q @ k.transpose(0, 1, 3, 2) / math.sqrt(E // H)
        w = jax.nn.softmax(jnp.where(jnp.tril(jnp.ones((t, t))) == 0, -jnp.inf, w), axis=-1)
        a = (w @ v).transpose(0, 2, 1, 3).reshape(b, t, E)
        x = x + nn.Dense(E, name="attn_out")(a)
        y = nn.LayerNorm(epsilon=1e-5, name="ln_2")(x)
        y = nn.Dense(E, name="mlp_proj")(jax.nn.gelu(nn.Dense(4 * E, name="mlp_fc")(y)))
        return x + y


class LinenGPT2(nn.Module):
    @nn.compact
    def __call__(self, ids: Any) -> Any:
        x = nn.Embed(V, E, name="wte")(ids) + nn.Embed(T, E, name="wpe")(jnp.arange(ids.shape[1]))
        for i in range(2):
            x = LinenGPT2Block(name=f"h_{i}")(x)
        return nn.LayerNorm(epsilon=1e-5, name="ln_f")(x)
