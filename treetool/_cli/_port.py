"""`treetool port SOURCE TARGET`: the plan that maps a checkpoint onto a model, and its proof.

Exit 0 when the plan is complete and unambiguous (and `--check` passed), 1 otherwise, 2 on an
error (one line on stderr).
"""

from __future__ import annotations

import argparse
import os
import sys

from treetool._cli._target import EXIT_DIFFERENT, EXIT_OK, CliError, console
from treetool._cli._targets import _import_target, load_target

_FORCE = "use --force to replace it"


def port_arguments(sp: argparse.ArgumentParser) -> None:
    """The arguments of `treetool port`."""
    sp.add_argument("source", metavar="SOURCE", help="the checkpoint (file, sharded index, URL)")
    sp.add_argument(
        "target",
        metavar="TARGET",
        help="the model to fill: module:attr (a model, or a function returning one) or "
        "another checkpoint",
    )
    sp.add_argument(
        "--rules",
        metavar="FILE",
        help="a rule file (as --json's `rules` or "
        "plan.rules writes it), edited: its lines replace the automatic decisions",
    )
    sp.add_argument(
        "--write",
        metavar="OUT",
        help="save the filled tree: .safetensors (streamed), .npz, .eqx, .msgpack",
    )
    sp.add_argument(
        "--check",
        metavar="MODULE:FN",
        help="FN(ported) returns (outputs, reference outputs); reports the largest difference",
    )
    sp.add_argument("--atol", type=float, default=1e-4, help="--check tolerance (default 1e-4)")
    sp.add_argument("--cast", action="store_true", help="cast to the target's dtypes")
    sp.add_argument("--rules-out", metavar="FILE", help="write the plan's rule file")
    sp.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --write / --rules-out file (by default it is refused)",
    )
    sp.add_argument("--json", action="store_true", help="machine-readable output")
    sp.add_argument("--trust", action="store_true", help="run code from pickles (unsafe)")


def cmd_port(args: argparse.Namespace) -> int:
    """Plan, print, and optionally write and check."""
    from treetool._cli._json import _print_json
    from treetool._port import port
    from treetool._port._write import write_plan
    from treetool.io._atomic import atomic_write, refuse_existing

    outputs = [p for p in (args.write, args.rules_out) if p]
    if len(outputs) == 2 and os.path.abspath(outputs[0]) == os.path.abspath(outputs[1]):
        raise CliError(f"{args.write}: --write and --rules-out name the same file")
    if not args.force:  # refused before anything is read, not after
        for p in outputs:
            refuse_existing(p, hint=_FORCE)
    if args.rules is not None and not os.path.isfile(args.rules):
        raise CliError(f"{args.rules}: no such rule file")
    source = load_target(args.source, trust=args.trust).tree
    target = load_target(args.target, trust=args.trust).tree
    plan = port(source, target, rules=args.rules)
    plan.source_label = args.source
    check = None
    if args.check is not None:
        fn = _import_target(args.check, call=False)
        if not callable(fn):
            raise CliError(f"{args.check}: not a function")
        check = plan.check(fn, atol=args.atol)
    if args.rules_out:
        with atomic_write(args.rules_out, overwrite=args.force, hint=_FORCE) as fh:
            fh.write(plan.rules.encode("utf-8"))
    if args.json:
        data = plan.to_dict()
        data["rules"] = plan.rules
        if check is not None:
            data["check"] = {"max_abs_diff": check.max_abs_diff, "atol": check.atol, "ok": check.ok}
        _print_json(data)
    else:
        out = console()
        out.print(plan)
        if check is not None:
            out.print(str(check))
    if args.write:
        write_plan(plan, args.write, cast=args.cast, overwrite=args.force, hint=_FORCE)
        print(f"treetool: wrote {args.write}", file=sys.stderr)
    ok = plan.complete and (check is None or check.ok)
    return EXIT_OK if ok else EXIT_DIFFERENT
