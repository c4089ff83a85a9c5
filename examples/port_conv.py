"""A torch conv net's checkpoint ported into an equinox model that runs under jit and vmap.

torch writes the file (`torch.save(state_dict)`, as a training script does); treetool reads it
without torch, plans how its entries fill the equinox model, and `plan.apply()` gives the
model with jax arrays (eager by default), ready for `jax.jit` and `jax.vmap`. The outputs
match torch's within 1e-5.

python examples/port_conv.py
"""

from __future__ import annotations

import os
import tempfile

import equinox as eqx
import jax
import numpy as np
import torch

import treetool as tt

# --- torch's side: a small conv net and its checkpoint ---
torch.manual_seed(0)
net = torch.nn.Sequential(
    torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
    torch.nn.Conv2d(8, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
    torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10),
).eval()  # fmt: skip
path = os.path.join(tempfile.mkdtemp(), "convnet.pt")
torch.save(net.state_dict(), path)


# --- jax's side: the same net in equinox, freshly initialised ---
class ConvNet(eqx.Module):
    conv1: eqx.nn.Conv2d
    conv2: eqx.nn.Conv2d
    head: eqx.nn.Linear

    def __init__(self, key: jax.Array) -> None:
        k1, k2, k3 = jax.random.split(key, 3)
        self.conv1 = eqx.nn.Conv2d(3, 8, 3, padding=1, key=k1)
        self.conv2 = eqx.nn.Conv2d(8, 16, 3, stride=2, padding=1, key=k2)
        self.head = eqx.nn.Linear(16, 10, key=k3)

    def __call__(self, x: jax.Array) -> jax.Array:  # one image, (C, H, W)
        x = jax.nn.relu(self.conv1(x))
        x = jax.nn.relu(self.conv2(x))
        return self.head(x.mean(axis=(1, 2)))


plan = tt.port(path, ConvNet(jax.random.key(0)))
print(f"plan complete: {plan.complete}")
for r in plan.rows:
    print(f"  {r.target:<14} <- {r.sources[0]:<9} {' '.join(r.steps) or 'identity'}")

model = plan.apply()  # jax arrays where the model had jax arrays
print(f"leaf type: {type(model.conv1.weight).__name__}")

images = np.random.RandomState(0).randn(4, 3, 16, 16).astype(np.float32)
out = jax.jit(jax.vmap(model))(images)
with torch.no_grad():
    ref = net(torch.from_numpy(images)).numpy()
err = float(np.max(np.abs(np.asarray(out) - ref)))
assert err <= 1e-5, err
print(f"jit(vmap(model)) matches torch: {out.shape}, max abs difference <= 1e-5")
