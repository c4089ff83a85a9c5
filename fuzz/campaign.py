"""The long fuzzing campaign: each format for a time budget, one fuzzer at a time.

libFuzzer stops at the first finding; this runner records it (the input, the signature from
`harness.py --replay`), adds the signature to `TREETOOL_FUZZ_SKIP` and starts the format again
on its grown working corpus, until the format's time is spent. The classes already listed in
`fuzz/findings/KNOWN.md` are skipped from the start (`--report-known` to stop on them too). It prints, and writes to
`OUT/results.json`, the executions and the distinct findings of every format.

    nice -n 19 .venv/bin/python fuzz/campaign.py --minutes 3 --out /tmp/treetool-campaign
    nice -n 19 .venv/bin/python fuzz/campaign.py --minutes 10 --out DIR pickle npz

Inputs that found something stay in `OUT/artifacts/<format>/`; minimise one and keep it as
`fuzz/findings/<format>/<short-name>` (see fuzz/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
HARNESS = os.path.join(HERE, "harness.py")
FORMATS = ("pickle", "npy", "npz", "safetensors", "msgpack", "equinox", "orbax")
#: restarts per format after findings (a finding the skip list cannot silence, such as a
#: hang, would otherwise restart forever)
_MAX_RESTARTS = 12


def _executions(log: str) -> int:
    stat = re.findall(r"stat::number_of_executed_units: (\d+)", log)
    if stat:
        return int(stat[-1])
    done = re.findall(r"^#(\d+)\s", log, re.MULTILINE)
    return int(done[-1]) if done else 0


def _signature(fmt: str, path: str, env: dict[str, str]) -> str:
    name = os.path.basename(path)
    if name.startswith(("timeout-", "oom-", "slow-unit-")):
        return name.partition("-")[0]
    env = {k: v for k, v in env.items() if k != "TREETOOL_FUZZ_SKIP"}
    proc = subprocess.run(
        [sys.executable, HARNESS, fmt, "--replay", path],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    m = re.search(r": FINDING (\S+)", proc.stdout)
    return m.group(1) if m else f"not reproduced (rc={proc.returncode})"


def known_signatures() -> list[str]:
    """The signatures listed in fuzz/findings/KNOWN.md (classes already recorded)."""
    path = os.path.join(HERE, "findings", "KNOWN.md")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as fh:
        return re.findall(r"^- `[^`]+` \[(\S+)\]:", fh.read(), re.MULTILINE)


def campaign(fmt: str, seconds: float, out: str, seed: int, skip: list[str]) -> dict:
    """Fuzz one format for `seconds`, not stopping on `skip`; return executions and findings."""
    work = os.path.join(out, "work", fmt)
    art = os.path.join(out, "artifacts", fmt)
    os.makedirs(work, exist_ok=True)
    os.makedirs(art, exist_ok=True)
    env = dict(os.environ, PYTHONHASHSEED="0", JAX_PLATFORMS="cpu")
    skip = list(skip)
    findings: dict[str, str] = {}
    executions = 0
    start = time.monotonic()
    for restart in range(_MAX_RESTARTS + 1):
        left = int(seconds - (time.monotonic() - start))
        if left < 5:
            break
        before = set(os.listdir(art))
        env["TREETOOL_FUZZ_SKIP"] = ",".join(skip)
        proc = subprocess.run(
            [
                sys.executable,
                HARNESS,
                fmt,
                f"-max_total_time={left}",
                f"-seed={seed + restart}",
                "-timeout=10",
                "-rss_limit_mb=2048",
                "-max_len=65536",
                "-print_final_stats=1",
                f"-artifact_prefix={art}{os.sep}",
                work,
                os.path.join(HERE, "corpus", fmt),
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=out,
        )
        with open(os.path.join(out, f"log-{fmt}-{restart}.txt"), "w") as fh:
            fh.write(proc.stderr)
        executions += _executions(proc.stderr)
        new = sorted(set(os.listdir(art)) - before)
        if not new and proc.returncode != 0:  # killed from outside (no libFuzzer report)
            findings.setdefault(f"exit {proc.returncode} without a report", f"log-{fmt}-{restart}")
            continue
        if not new:
            break
        for name in new:
            sig = _signature(fmt, os.path.join(art, name), env)
            findings.setdefault(sig, name)
            if "@" in sig:
                skip.append(sig)
    return {
        "format": fmt,
        "seconds": round(time.monotonic() - start),
        "executions": executions,
        "corpus": len(os.listdir(work)),
        "findings": findings,
    }


def main() -> None:
    """Run the campaign over the formats given (all by default) and print the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("formats", nargs="*", default=list(FORMATS))
    p.add_argument("--minutes", type=float, default=3.0, help="per format")
    p.add_argument("--out", required=True, help="working corpus, artifacts, logs, results")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--report-known",
        action="store_true",
        help="stop on the classes of fuzz/findings/KNOWN.md too (skipped by default)",
    )
    args = p.parse_args()
    skip = [] if args.report_known else known_signatures()
    os.makedirs(args.out, exist_ok=True)
    results = []
    for fmt in args.formats:
        r = campaign(fmt, args.minutes * 60, os.path.abspath(args.out), args.seed, skip)
        results.append(r)
        with open(os.path.join(args.out, "results.json"), "w") as fh:
            json.dump(results, fh, indent=2)
        print(
            f"{fmt:12} {r['executions']:>9} executions {r['seconds']:>5} s "
            f"corpus {r['corpus']:>5}  findings {len(r['findings'])}",
            flush=True,
        )
        for sig, name in r["findings"].items():
            print(f"    {sig}  ({name})", flush=True)


if __name__ == "__main__":
    main()
