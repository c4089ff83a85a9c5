"""Assignment: which source entry fills which target leaf, with which transform, and why.

Leaves are grouped into modules (a path without its last token: `layers.0.attn.q`), modules
into repeated blocks (the numbers folded: `layers.*.attn.q`, one group per distinct set of
roles and shapes). Groups are paired, one decision per block type, in this order:

1. by name: the same normalised tokens (numbers matched in order: torch's `0, 2, 4` around
   activations onto `0, 1, 2`), or the same tokens but for the number of a stacked axis;
2. by shape: a group that only one other group can fill (same roles, a transform that fits);
3. the remaining modules one by one, by shape; what is still tied is ambiguous (never guessed).

Within a pair, each leaf's transform comes from `_transforms.candidates`, the framework
conventions choosing among several (`_conventions.layout`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from treetool._port._flatten import flag_flatten
from treetool._port._names import Leaf, module_tokens_of
from treetool._port._rows import Ambiguity, Match, Row
from treetool._port._transforms import (
    StepError,
    candidates,
    conv_transpose_steps,
    steps_shape,
    transposes,
)

__all__ = ["Ambiguity", "Match", "Row", "match"]

Tok = str | int


@dataclass
class _Module:
    toks: tuple[Tok, ...]
    leaves: dict[str, Leaf]

    @property
    def pattern(self) -> tuple[Tok, ...]:
        return tuple("*" if isinstance(t, int) else t for t in self.toks)

    @property
    def index(self) -> tuple[int, ...]:
        return tuple(t for t in self.toks if isinstance(t, int))

    @property
    def sig(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        return tuple(sorted((r, lf.shape) for r, lf in self.leaves.items()))


@dataclass
class _Group:
    pattern: tuple[Tok, ...]
    members: list[_Module]  # in index order

    @property
    def roles(self) -> frozenset[str]:
        return frozenset(self.members[0].leaves)


def _modules(leaves: Iterable[Leaf]) -> list[_Module]:
    mods: dict[tuple[Tok, ...], _Module] = {}
    for lf in leaves:
        toks, role = module_tokens_of(lf.tokens)
        m = mods.setdefault(toks, _Module(toks, {}))
        if role in m.leaves:  # two leaves of one role: each its own module
            toks = (*toks, f"#{len(mods)}")
            m = mods.setdefault(toks, _Module(toks, {}))
        m.leaves[role] = lf
    return list(mods.values())


def _groups(mods: list[_Module]) -> list[_Group]:
    out: dict[tuple[object, ...], _Group] = {}
    for m in sorted(mods, key=lambda m: m.index):
        out.setdefault((m.pattern, m.sig), _Group(m.pattern, [])).members.append(m)
    return list(out.values())


def _decide(
    s: Leaf, t: Leaf, dst: tuple[int, ...]
) -> tuple[tuple[str, ...], str] | list[tuple[str, ...]] | None:
    """(steps, how) for source leaf `s` into target leaf `t` of (inner) shape `dst`; the
    candidates when the conventions cannot choose; None when nothing fits."""
    ct = _conv_transpose(s, t, dst)
    if ct is not None:
        return ct, "convention"
    cands = candidates(s.shape, dst)
    if not cands:
        return None
    pre: tuple[str, ...] = ()
    if s.part is not None:
        axis, i, n = s.part
        pre = (f"split({axis},{i}/{n})",)
    if {s.layout, t.layout} <= {"oi", "io"}:
        want = s.layout != t.layout
        fit = [c for c in cands if transposes(c) == want]
        if fit:
            return (*pre, *fit[0]), "convention" if len(cands) > 1 else "shape"
        if len(cands) == 1:  # against the convention, but the only transform that fits
            return (*pre, *cands[0]), "shape"
        return [(*pre, *c) for c in cands]
    if len(cands) == 1:
        return (*pre, *cands[0]), "shape"
    keep = [c for c in cands if not transposes(c)]
    if s.layout == t.layout == "plain" and keep:  # embeddings and norms keep their layout
        return (*pre, *keep[0]), "convention"
    return [(*pre, *c) for c in cands]


def _conv_transpose(s: Leaf, t: Leaf, dst: tuple[int, ...]) -> tuple[str, ...] | None:
    """The steps for a transposed conv kernel (one side's layout says so: a torch `"oi"`
    weight on the other side is torch's `ConvTranspose` layout); None otherwise or when the
    shapes do not fit."""
    if not (s.layout.startswith("ct_") or t.layout.startswith("ct_")) or s.part is not None:
        return None
    src = "ct_torch" if s.layout == "oi" else s.layout
    to = "ct_torch" if t.layout == "oi" else t.layout
    steps = conv_transpose_steps(len(s.shape), src, to)
    if steps is None:
        return None
    try:
        return steps if steps_shape(steps, s.shape) == dst else None
    except StepError:
        return None


def _pair_modules(
    ms: _Module, mt: _Module, stacked: int = 0
) -> dict[str, tuple[tuple[str, ...], str] | list[tuple[str, ...]]] | None:
    """Per role, the decision for module `ms` into `mt` (its leaves with a leading axis of
    `stacked` when it is a scan stack of `stacked` source modules); None when incompatible."""
    if set(ms.leaves) != set(mt.leaves):
        return None
    out: dict[str, tuple[tuple[str, ...], str] | list[tuple[str, ...]]] = {}
    for role, s in ms.leaves.items():
        t = mt.leaves[role]
        dst = t.shape
        if stacked:
            if not dst or dst[0] != stacked:
                return None
            dst = dst[1:]
        d = _decide(s, t, dst)
        if d is None:
            return None
        out[role] = d
    return out


def _fold(names: list[str]) -> str:
    """`.layers[0..11].w` from the names of a block's instances (in order)."""
    if len(names) == 1:
        return names[0]
    a, b = names[0], names[-1]
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    j = 0
    while j < min(len(a), len(b)) - i and a[-1 - j] == b[-1 - j]:
        j += 1
    mid_a, mid_b = a[i : len(a) - j], b[i : len(b) - j]
    if mid_a.isdigit() and mid_b.isdigit():
        while i > 0 and a[i - 1].isdigit():  # `1` and `11` share the digit `1`
            i -= 1
            mid_a, mid_b = a[i : len(a) - j], b[i : len(b) - j]
        return f"{a[:i]}{mid_a}..{mid_b}{a[len(a) - j :]}"
    return f"{a} … ({len(names)})"


class _Matcher:
    def __init__(self, src: list[Leaf], dst: list[Leaf]) -> None:
        self.src_groups = _groups(_modules(src))
        self.dst_groups = _groups(_modules(dst))
        self.result = Match()
        self.used_src: set[int] = set()
        self.used_dst: set[int] = set()

    def run(self) -> Match:
        self._by_name()
        self._by_shape_groups()
        self._by_shape_modules()
        for g in self.src_groups:
            if id(g) not in self.used_src:
                for m in g.members:
                    if id(m) not in self.used_src:
                        self.result.unmatched_source += [lf.name for lf in m.leaves.values()]
        for g in self.dst_groups:
            if id(g) not in self.used_dst:
                for m in g.members:
                    if id(m) not in self.used_dst:
                        self.result.unmatched_target += [lf.name for lf in m.leaves.values()]
        self.result.unmatched_source = sorted(set(self.result.unmatched_source))
        self.result.unmatched_target = sorted(set(self.result.unmatched_target))
        return self.result

    # --- emitting rows
    def _emit(self, sg: list[_Module], tg: list[_Module], how: str, stacked: bool) -> bool:
        """Rows for source modules `sg` into target modules `tg` (pairwise, or all of `sg`
        stacked into the one module of `tg`); False (nothing emitted) when incompatible."""
        plans: list[dict[str, tuple[tuple[str, ...], str] | list[tuple[str, ...]]]] = []
        if stacked:
            d = _pair_modules(sg[0], tg[0], stacked=len(sg))
            if d is None or any(_pair_modules(m, sg[0]) is None for m in sg[1:]):
                return False
            plans.append(d)
        else:
            for ms, mt in zip(sg, tg):
                d = _pair_modules(ms, mt)
                if d is None:
                    return False
                plans.append(d)
        for role in tg[0].leaves:
            names = [m.leaves[role].name for m in tg]
            group = "" if stacked else _fold(names) if len(tg) > 1 else ""
            for k, mt in enumerate(tg):
                dec = plans[k][role]
                t = mt.leaves[role]
                srcs = [m.leaves[role] for m in (sg if stacked else [sg[k]])]
                if isinstance(dec, list):
                    self.result.ambiguous.append(
                        Ambiguity(
                            (t.name,),
                            tuple(f"{srcs[0].name} : {' '.join(c) or 'identity'}" for c in dec),
                            "the shape fits more than one layout and the names do not tell "
                            "which framework laid it out",
                            (srcs[0].name,),
                            tuple((t.name, srcs[0].name, c) for c in dec),
                        )
                    )
                    continue
                steps, why = dec
                row_how = f"{how}+convention" if why == "convention" else how
                self.result.rows.append(
                    Row(
                        target=t.name,
                        sources=tuple(s.name for s in srcs),
                        steps=steps,
                        source_shape=_real_shape(srcs[0]),
                        target_shape=t.shape if t.part is None else _real_shape(t),
                        how=row_how,
                        part=t.part,
                        group=group,
                    )
                )
        for m in sg:
            self.used_src.add(id(m))
        for m in tg:
            self.used_dst.add(id(m))
        return True

    def _free(self, groups: list[_Group], used: set[int]) -> list[_Group]:
        return [g for g in groups if all(id(m) not in used for m in g.members)]

    # --- 1. by name
    def _by_name(self) -> None:
        by_pattern: dict[tuple[Tok, ...], list[_Group]] = {}
        by_unstarred: dict[tuple[Tok, ...], list[_Group]] = {}  # a star dropped: stacks
        for sg in self.src_groups:
            by_pattern.setdefault(sg.pattern, []).append(sg)
            if len(sg.members) > 1:
                for k, t in enumerate(sg.pattern):
                    if t == "*":
                        key = sg.pattern[:k] + sg.pattern[k + 1 :]
                        by_unstarred.setdefault(key, []).append(sg)
        for tg in self._free(self.dst_groups, self.used_dst):
            same = [
                sg
                for sg in by_pattern.get(tg.pattern, [])
                if len(sg.members) == len(tg.members) and self._is_free(sg)
            ]
            fits = [sg for sg in same if _compatible(sg.members, tg.members)]
            if len(fits) == 1:
                self._emit(fits[0].members, tg.members, "name", stacked=False)
                continue
            if len(tg.members) == 1:  # a scan stack: the same name with one number less
                stacks = [
                    sg
                    for sg in by_unstarred.get(tg.pattern, [])
                    if self._is_free(sg)
                    and _pair_modules(sg.members[0], tg.members[0], len(sg.members)) is not None
                ]
                if len(stacks) == 1:
                    self._emit(stacks[0].members, tg.members, "name", stacked=True)
                    continue
            if len(fits) > 1:
                self._ambiguous_groups(tg, fits, "several source blocks of the same name fit")

    def _is_free(self, g: _Group) -> bool:
        return all(id(m) not in self.used_src for m in g.members)

    # --- 2. by shape, whole groups
    def _by_shape_groups(self) -> None:
        src = self._free(self.src_groups, self.used_src)
        dst = self._free(self.dst_groups, self.used_dst)
        pairs, _ = _eliminate(
            src,
            dst,
            key=lambda g: (len(g.members), _size_key(g.members[0])),
            fits=lambda a, b: _compatible(a.members, b.members),
        )
        for sg, tg in pairs:
            self._emit(sg.members, tg.members, "shape", False)

    # --- 3. by shape, module by module
    def _by_shape_modules(self) -> None:
        src = [m for g in self.src_groups for m in g.members if id(m) not in self.used_src]
        dst = [m for g in self.dst_groups for m in g.members if id(m) not in self.used_dst]
        pairs, tied = _eliminate(
            src, dst, key=_size_key, fits=lambda a, b: _pair_modules(a, b) is not None
        )
        for ms, mt in pairs:
            self._emit([ms], [mt], "shape", False)
        for mt, fits in tied:
            self.result.ambiguous.append(
                Ambiguity(
                    tuple(lf.name for lf in mt.leaves.values()),
                    tuple(_module_label(ms) for ms in fits[:_SHOWN]),
                    f"{len(fits)} source modules have these roles and shapes "
                    "and no name in common with it",
                    tuple(lf.name for ms in fits[:_HELD] for lf in ms.leaves.values()),
                    _proposals(fits[:_SHOWN], mt),
                )
            )
            self.used_dst.add(id(mt))
            for ms in fits:
                self.used_src.add(id(ms))

    def _ambiguous_groups(self, tg: _Group, fits: list[_Group], reason: str) -> None:
        self.result.ambiguous.append(
            Ambiguity(
                tuple(lf.name for m in tg.members for lf in m.leaves.values()),
                tuple(_module_label(g.members[0]) for g in fits),
                reason,
                tuple(lf.name for g in fits for m in g.members for lf in m.leaves.values()),
            )
        )
        for m in tg.members:
            self.used_dst.add(id(m))


_SHOWN = 8  # candidates listed per ambiguity
_HELD = 64  # candidates an ambiguity holds back from "source not used"
_MAX_PAIRS = 1 << 16  # pairs compared per bucket of same-size modules before giving up


def _size_key(m: _Module) -> tuple[tuple[str, int], ...]:
    """What a transform of the catalogue keeps: each role's number of elements."""
    return tuple(sorted((r, math.prod(lf.shape)) for r, lf in m.leaves.items()))


def _eliminate(
    src: list[Any], dst: list[Any], key: Any, fits: Any
) -> tuple[list[tuple[Any, Any]], list[tuple[Any, list[Any]]]]:
    """Pairs that fit only each other (repeatedly, as pairs are taken out), and the targets
    left with several candidates. Candidates are compared only within a bucket of `key`;
    a bucket too big to compare pairwise leaves its targets tied with all its sources."""
    buckets: dict[Any, tuple[list[Any], list[Any]]] = {}
    for x in src:
        buckets.setdefault(key(x), ([], []))[0].append(x)
    for y in dst:
        buckets.setdefault(key(y), ([], []))[1].append(y)
    pairs: list[tuple[Any, Any]] = []
    tied: list[tuple[Any, list[Any]]] = []
    for ss, ts in buckets.values():
        if not ss or not ts:
            continue
        if len(ss) * len(ts) > _MAX_PAIRS:
            tied += [(t, list(ss)) for t in ts]
            continue
        cand = {j: {i for i, s in enumerate(ss) if fits(s, t)} for j, t in enumerate(ts)}
        back: dict[int, set[int]] = {i: set() for i in range(len(ss))}
        for j, c in cand.items():
            for i in c:
                back[i].add(j)
        changed = True
        while changed:
            changed = False
            for j in list(cand):
                c = cand[j]
                if len(c) == 1:
                    (i,) = c
                    if back[i] == {j}:
                        pairs.append((ss[i], ts[j]))
                        del cand[j]
                        del back[i]
                        changed = True
        for j, c in cand.items():
            if len(c) > 1:
                tied.append((ts[j], [ss[i] for i in sorted(c)]))
    return pairs, tied


def _module_label(m: _Module) -> str:
    names = sorted(lf.name for lf in m.leaves.values())
    return names[0] if len(names) == 1 else "{" + ", ".join(names) + "}"


def _proposals(fits: list[_Module], mt: _Module) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """(target, source, steps) of each candidate module's leaves, for the rule file."""
    out = []
    for ms in fits:
        d = _pair_modules(ms, mt) or {}
        for role, dec in d.items():
            steps = dec[0]  # the decided steps, or the first candidate
            out.append((mt.leaves[role].name, ms.leaves[role].name, tuple(steps)))
    return tuple(out)


def _compatible(sm: list[_Module], tm: list[_Module]) -> bool:
    return all(_pair_modules(a, b) is not None for a, b in zip(sm, tm))


def _real_shape(lf: Leaf) -> tuple[int, ...]:
    if lf.part is None:
        return lf.shape
    axis, _, n = lf.part
    return tuple(d * n if k == axis else d for k, d in enumerate(lf.shape))


def match(src: list[Leaf], dst: list[Leaf]) -> Match:
    """Pair `src` leaves with `dst` leaves; see the module docstring."""
    result = _Matcher(src, dst).run()
    flag_flatten(result, src, dst)
    return result


def _likeness(a: Leaf, b: Leaf) -> tuple[int, int]:
    """How alike two leaves' names are: (shared tokens, the same role)."""
    ta, tb = a.tokens, b.tokens
    shared = len(set(ta[:-1]) & set(tb[:-1]))
    return shared, int(bool(ta) and bool(tb) and ta[-1] == tb[-1])


def suggest(
    targets: list[str], sources: list[str], src: list[Leaf], dst: list[Leaf]
) -> dict[str, tuple[str, tuple[str, ...]] | None]:
    """A candidate rule for each unmatched target: `(source, steps)` from the unmatched
    sources whose shape a transform of the catalogue turns into the target's (the layout
    conventions choosing, as for any row), the most alike by name first, each source
    proposed once; None where no unmatched source fits. Fused parts are not proposed.

    Example:
        >>> s = [Leaf("prelu1.weight", ("prelu1", "weight"), (10,), "float32", "plain")]
        >>> t = [Leaf(".act1.a", ("act1", "a"), (1, 1, 10), "float32", "plain")]
        >>> suggest([".act1.a"], ["prelu1.weight"], s, t)
        {'.act1.a': ('prelu1.weight', ('reshape(1,1,10)',))}
    """
    by_src = {lf.name: lf for lf in src if lf.part is None}
    by_dst = {lf.name: lf for lf in dst if lf.part is None}
    free = [by_src[n] for n in sources if n in by_src]
    options: list[tuple[tuple[int, int], int, int, str, tuple[str, ...]]] = []
    for j, name in enumerate(targets):
        t = by_dst.get(name)
        if t is None:
            continue
        for i, s in enumerate(free):
            if math.prod(s.shape) != math.prod(t.shape):
                continue
            d = _decide(s, t, t.shape)
            if d is None:
                continue
            steps = d[0]  # the decided steps, or the first of several candidates
            like = _likeness(s, t)
            options.append(((-like[0], -like[1]), j, i, s.name, tuple(steps)))
    out: dict[str, tuple[str, tuple[str, ...]] | None] = dict.fromkeys(targets)
    taken: set[str] = set()
    for _, j, _, s_name, steps in sorted(options, key=lambda o: (o[0], o[1], o[2])):
        name = targets[j]
        if out[name] is None and s_name not in taken:
            out[name] = (s_name, steps)
            taken.add(s_name)
    return out
