"""The rule file: a plan as editable text, and a plan read back from it.

One line per target leaf (or part of a fused one), names quoted as JSON strings:

    ".layers[0].weight" <- "0.weight" : T        # shape
    ".stack.w" <- "l.0.w" + "l.1.w" : identity    # name (stacked on a new leading axis)
    "['attn.in_proj_weight']" @0:1/3 <- "attn.k.kernel" : reshape(4,4) T   # part 1 of 3
    drop "bn.num_batches_tracked"                  # why

Lines starting with `#` are comments; an ambiguous target is written as commented-out
candidate lines, one of which can be uncommented, and so is a target left unfilled when an
unused source fits its shape (`_match.suggest`: the transform it needs, the most alike name).
A rule line replaces the automatic decision for its target; targets the file does not name
keep theirs.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from treetool._port._error import PortError
from treetool._port._match import Ambiguity, Row, suggest
from treetool._port._transforms import StepError, parse_steps, steps_shape

if TYPE_CHECKING:
    from treetool._port._plan import Plan

__all__ = ["MAX_RULES_BYTES", "ruled", "write_rules"]

#: the largest rule file read, in bytes (a rule line is ~100 bytes: room for some 150,000 rules);
#: a larger one is refused in one line, never cut
MAX_RULES_BYTES = 16 << 20
_MAX_QUOTE = 300  # characters of a rule file's text quoted in an error

_HEADER = """\
# treetool port rules
# TARGET [@axis:i/n] <- SOURCE [+ SOURCE ...] : STEPS   # how it was decided
# STEPS: identity, T, perm(..), split(axis,i/n), index(i), reshape(..), cast(dtype);
# several SOURCEs are stacked on a new leading axis; @axis:i/n fills part i of n of TARGET.
# drop SOURCE   # why it is not used
"""


def _q(name: str) -> str:
    return json.dumps(name, ensure_ascii=True)


def _line(target: str, part: Any, sources: Any, steps: Any) -> str:
    at = f" @{part[0]}:{part[1]}/{part[2]}" if part else ""
    srcs = " + ".join(_q(s) for s in sources)
    return f"{_q(target)}{at} <- {srcs} : {' '.join(steps) or 'identity'}"


def write_rules(plan: Plan) -> str:
    """The rule file of `plan`."""
    lines = [_HEADER.rstrip("\n")]
    for r in plan.rows:
        lines.append(f"{_line(r.target, r.part, r.sources, r.steps)}   # {r.how}")
    for name, why in plan.dropped.items():
        lines.append(f"drop {_q(name)}   # {why}")
    for a in plan.ambiguous:
        lines.append(f"# ambiguous: {', '.join(a.targets)}: {a.reason}; uncomment one:")
        for t, s, steps in a.proposals:
            lines.append(f"# {_line(t, None, (s,), steps)}")
    proposed = suggest(
        plan.unmatched_target, plan.unmatched_source, plan._source.leaves, plan._target_side.leaves
    )
    for t in plan.unmatched_target:
        lines.append(f"# target not filled: {_q(t)}")
        got = proposed.get(t)
        if got is not None:  # a rule that works when uncommented (check that the names agree)
            lines.append(f"# {_line(t, None, (got[0],), got[1])}   # candidate: the shape fits")
    for s in plan.unmatched_source:
        lines.append(f"# source not used: {_q(s)}")
    return "\n".join(lines) + "\n"


class _Reader:
    def __init__(self, line: str, where: str) -> None:
        self.s, self.i, self.where = line, 0, where
        self.dec = json.JSONDecoder()

    def fail(self, what: str) -> Exception:
        if len(what) > _MAX_QUOTE:
            what = what[:_MAX_QUOTE] + "..."
        return PortError(f"{self.where}: {what}")

    def ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i] == " ":
            self.i += 1

    def name(self) -> str:
        self.ws()
        # only a JSON string is decoded: never an array or an object, whose nesting the
        # decoder follows by recursion (100,000 `[` were a RecursionError)
        if not self.s.startswith('"', self.i):
            raise self.fail('expected a quoted name ("layers.0.weight")')
        try:
            value, self.i = self.dec.raw_decode(self.s, self.i)
        except json.JSONDecodeError:
            raise self.fail('expected a quoted name ("layers.0.weight")') from None
        if not isinstance(value, str):
            raise self.fail('expected a quoted name ("layers.0.weight")')
        return value

    def token(self, text: str) -> bool:
        self.ws()
        if self.s.startswith(text, self.i):
            self.i += len(text)
            return True
        return False

    def rest(self) -> str:
        text = self.s[self.i :]
        return text.split("#", 1)[0].strip()


def _parse(
    text: str, label: str
) -> tuple[list[tuple[str, Any, tuple[str, ...], tuple[str, ...]]], list[str]]:
    rows, drops = [], []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        rd = _Reader(line, f"{label}: line {n}")
        if line.startswith("drop "):
            rd.i = 5
            drops.append(rd.name())
            continue
        target = rd.name()
        part = None
        if rd.token("@"):
            spec = rd.s[rd.i :].split(" ", 1)[0]
            rd.i += len(spec)
            try:
                axis, _, frac = spec.partition(":")
                i, _, k = frac.partition("/")
                part = (int(axis), int(i), int(k))
            except ValueError:
                raise rd.fail(f"expected @axis:i/n after the target, got @{spec}") from None
        if not rd.token("<-"):
            raise rd.fail("expected '<-' after the target")
        sources = [rd.name()]
        while rd.token("+"):
            sources.append(rd.name())
        if not rd.token(":"):
            raise rd.fail("expected ': STEPS' after the source")
        try:
            steps = parse_steps(rd.rest())
        except StepError as e:
            raise rd.fail(str(e)) from None
        rows.append((target, part, tuple(sources), steps))
    return rows, drops


def ruled(plan: Plan, rules: str | os.PathLike) -> tuple[Any, ...]:
    """The arguments of the `Plan` that is `plan` with the decisions of a rule file (its text,
    or a file name) put in (`_plan.apply_rules` builds it: this module does not import the
    class it reads)."""

    if isinstance(rules, os.PathLike) or (
        isinstance(rules, str) and "\n" not in rules and os.path.isfile(rules)
    ):
        label = os.fspath(rules)
        try:
            with open(label, "rb") as fh:
                data = fh.read(MAX_RULES_BYTES + 1)
                if len(data) > MAX_RULES_BYTES:
                    size = os.fstat(fh.fileno()).st_size
                    raise PortError(
                        f"{label}: the rule file is {max(size, len(data)):,} bytes, over the "
                        f"{MAX_RULES_BYTES >> 20} MiB a rule file may be; not read"
                    )
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise PortError(
                f"{label}: cannot read the rule file: not UTF-8 ({e.reason} at byte {e.start})"
            ) from None
        except OSError as e:
            raise PortError(f"{label}: cannot read the rule file: {e.strerror or e}") from None
    elif rules and "\n" not in rules and not rules.lstrip().startswith(('"', "#", "drop ")):
        raise PortError(f"{rules}: no such rule file")
    else:
        label, text = "rules", str(rules)
        if len(text) > MAX_RULES_BYTES:
            raise PortError(
                f"rules: the rule text is {len(text):,} characters, over the "
                f"{MAX_RULES_BYTES >> 20} MiB a rule file may be; not read"
            )
    parsed, drops = _parse(text, label)
    src, dst = plan._source, plan._target_side
    auto = {(r.target, r.part): r for r in plan.rows}
    ruled: dict[tuple[str, Any], Row] = {}
    for target, part, sources, steps in parsed:
        where = f"{label}: {target}"
        if target not in dst.shapes:
            raise PortError(f"{where}: the target has no leaf of that name")
        for s in sources:
            if s not in src.shapes:
                raise PortError(f"{where}: the source has no entry {s!r}")
        shape = dst.shapes[target]
        want = shape
        if part is not None:
            axis, i, k = part
            if not (0 <= axis < len(shape) and 0 <= i < k and shape[axis] % k == 0):
                raise PortError(f"{where}: @{axis}:{i}/{k} is not a part of shape {list(shape)}")
            want = tuple(d // k if a == axis else d for a, d in enumerate(shape))
        try:
            got = steps_shape(steps, src.shapes[sources[0]])
        except StepError as e:
            raise PortError(f"{where}: {e}") from None
        if len(sources) > 1:
            got = (len(sources), *got)
        if got != want:
            raise PortError(
                f"{where}: {' '.join(steps) or 'identity'} gives shape {list(got)} from "
                f"{sources[0]!r} {list(src.shapes[sources[0]])}, the target needs {list(want)}"
            )
        old = auto.get((target, part))
        if old is not None and old.sources == sources and old.steps == steps:
            ruled[(target, part)] = old
        else:
            ruled[(target, part)] = Row(
                target, sources, steps, src.shapes[sources[0]], shape, "rule (edited)", part
            )
    ruled_targets = {t for t, _ in ruled}
    rows = [r for r in plan.rows if r.target not in ruled_targets] + [r for r in ruled.values()]
    order = {name: k for k, name in enumerate(dst.order)}
    rows.sort(key=lambda r: (order.get(r.target, 0), r.part[1] if r.part else 0))
    dropped = dict(plan.dropped)
    for d in drops:
        if d not in src.shapes:
            raise PortError(f"{label}: drop {d!r}: the source has no entry of that name")
        dropped.setdefault(d, "dropped by a rule")
    used = {s for r in rows for s in r.sources}
    for s in used:
        dropped.pop(s, None)
    ambiguous: list[Ambiguity] = [a for a in plan.ambiguous if not set(a.targets) <= ruled_targets]
    held = {s for a in ambiguous for s in a.sources} | {t for a in ambiguous for t in a.targets}
    filled = {r.target for r in rows}
    return (
        rows,
        ambiguous,
        sorted(s for s in src.order if s not in used and s not in dropped and s not in held),
        sorted(t for t in dst.order if t not in filled and t not in held),
        dropped,
        src,
        plan._target,
        dst,
        plan.source_label,
    )
