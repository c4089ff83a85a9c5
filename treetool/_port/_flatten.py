"""The first Dense after a conv flatten: an ambiguity no shape can settle."""

from __future__ import annotations

import math

from treetool._port._names import Leaf
from treetool._port._rows import Ambiguity, Match

__all__ = ["flag_flatten"]


def flag_flatten(result: Match, src: list[Leaf], dst: list[Leaf]) -> None:
    """The first Dense after a conv flatten: torch flattens `(C, H, W)`, a channel-last JAX
    model (flax, haiku) flattens `(H, W, C)`, and only the model's code knows which it does.
    Its weight's row is turned into an ambiguity with both candidates."""
    channels = [lf.shape[0] for lf in src if lf.layout == "oi" and len(lf.shape) == 4]
    if not channels:
        return
    dst_layout = {lf.name: lf.layout for lf in dst}
    src_by_name = {lf.name: lf for lf in src}
    last_c = channels[-1]
    for k, r in enumerate(result.rows):
        lf = src_by_name.get(r.sources[0])
        if lf is None or lf.part is not None or len(r.sources) != 1 or len(lf.shape) != 2:
            continue
        out, n_in = lf.shape
        hw = n_in // last_c if n_in % last_c == 0 else 0
        side = math.isqrt(hw) if hw > 1 else 0
        if lf.layout != "oi" or dst_layout.get(r.target) != "io" or side * side != hw or hw < 2:
            continue
        hwc = (
            f"reshape({out},{last_c},{side},{side})",
            "perm(0,2,3,1)",
            f"reshape({out},{n_in})",
            "T",
        )
        result.ambiguous.append(
            Ambiguity(
                (r.target,),
                (
                    f"{lf.name} : {' '.join(r.steps)}   (the JAX model flattens (C, H, W), as torch)",
                    f"{lf.name} : {' '.join(hwc)}   (it flattens (H, W, C), channel-last)",
                ),
                f"the first Dense after a conv flatten ({last_c} channels x {side}x{side}): "
                "its input order depends on how the JAX model flattens",
                (lf.name,),
                ((r.target, lf.name, r.steps), (r.target, lf.name, hwc)),
            )
        )
        del result.rows[k]
        return
