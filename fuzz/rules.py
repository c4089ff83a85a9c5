"""Fuzz the `treetool port` rule-file parser (`treetool/_port/_rules.py`) with atheris.

`rules.py [--replay FILE ... | libFuzzer args]`: each input is a rule file (its bytes, as
`tt.port(..., rules=PATH)` reads them) applied to one small fixed plan (a two-leaf source and
target, one of them fused in three parts, so that `@axis:i/n`, `+`, `drop` and every step have
something to name). A **finding** is anything but a `treetool.TreetoolError` (a `PortError`
naming the line, a one-line size refusal): a `RecursionError`, a `ValueError` from a number, a
`JSONDecodeError`, a message over one line, a hang past `-timeout`. The seeds are in
`corpus/rules/` (the rule file the plan writes, edited, and small hostile ones).

Example:
    >>> h = RulesHarness()
    >>> h.one(b'"[\\'a\\']" <- "a" : T\\n')[:60]
    "PortError: rules.txt: ['a']: T gives shape [3, 2] from 'a' ["
    >>> h.one(b"[" * 100_000)[:46]
    'PortError: rules.txt: line 1: expected a quote'
    >>> h.close()
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import traceback

#: libFuzzer flags added when the command line does not give them
DEFAULT_FLAGS = {"-timeout": "10", "-rss_limit_mb": "2048", "-max_len": "65536"}


class RulesHarness:
    """One plan, and a scratch folder the inputs are written to."""

    def __init__(self) -> None:
        import numpy as np

        import treetool as tt

        self.tt = tt
        f32 = np.float32
        self.source = {
            "a": np.zeros((2, 3), f32),
            "b": np.zeros(3, f32),
            "q": np.zeros((2, 2), f32),
            "k": np.zeros((2, 2), f32),
            "v": np.zeros((2, 2), f32),
        }
        self.target = {
            "a": np.zeros((2, 3), f32),
            "b": np.zeros(3, f32),
            "qkv": np.zeros((6, 2), f32),
        }
        # (libFuzzer ends the process without unwinding: a fuzzing run leaves this folder in
        # TMPDIR, as harness.py's runs leave theirs; replay and the tests remove it)
        self.root = tempfile.mkdtemp(prefix="treetool-fuzz-rules-")
        self.path = os.path.join(self.root, "rules.txt")

    def one(self, data: bytes) -> str:
        """Apply the rule file `data`; return what happened (raise on a finding)."""
        with open(self.path, "wb") as fh:
            fh.write(data)
        try:
            plan = self.tt.port(self.source, self.target, rules=self.path)
        except self.tt.TreetoolError as e:
            text = str(e)
            if "\n" in text:
                raise AssertionError(f"a message of {text.count(chr(10)) + 1} lines") from e
            return f"{type(e).__name__}: {text.replace(self.root + os.sep, '')}"
        plan.rules  # noqa: B018 - the plan writes its rule file back
        return f"ok: {len(plan.rows)} rows"

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def replay(paths: list[str]) -> int:
    """Run inputs once each and print what happens; exit 1 if any is a finding."""
    h = RulesHarness()
    bad = 0
    try:
        for p in paths:
            with open(p, "rb") as fh:
                data = fh.read()
            try:
                said = h.one(data)
            except Exception as e:
                bad += 1
                print(f"{p}: FINDING {type(e).__name__}: {str(e)[:200]!a}")
                traceback.print_exc()
            else:
                print(f"{p}: {said[:200]!a}")
    finally:
        h.close()
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    """`rules.py [--replay FILE ... | libFuzzer args]`."""
    if len(argv) > 1 and argv[1] == "--replay":
        return replay(argv[2:])
    import atheris

    with atheris.instrument_imports(include=["treetool"]):
        import treetool._port._rules
        import treetool._port._transforms  # noqa: F401
    h = RulesHarness()

    def test_one_input(data: bytes) -> None:
        h.one(data)

    flags = argv[1:]
    given = {f.partition("=")[0] for f in flags}
    flags = [f"{k}={v}" for k, v in DEFAULT_FLAGS.items() if k not in given] + flags
    atheris.Setup([argv[0], *flags], test_one_input)
    try:
        atheris.Fuzz()
    finally:
        h.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
