"""Coverage-guided fuzzing of every checkpoint reader, bounded and seeded (issue 15).

Each format gets a short atheris run (`fuzz/harness.py`, a subprocess: libFuzzer owns its
process) from the committed seed corpus: a fixed number of executions with a fixed seed and
hash seed, so the run is the same every time. Reading may raise only `LoadError` and the views
(rich tree, `--json`, summary, HTML) may raise nothing: any other outcome is a finding and
fails the test with the exception and the input.

Every reproducer kept in `fuzz/findings/<format>/` is replayed as a regression test; those of
classes still being fixed on other branches are listed in `fuzz/findings/KNOWN.md` and marked
`xfail(strict=False)` until their fixes are merged; the bounded runs skip the signatures
listed there (and only those), so they fail on any other finding.
"""

from __future__ import annotations

import base64
import doctest
import functools
import importlib.util
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
from cli_runner import small_parent, together

pytest.importorskip("atheris")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FUZZ = os.path.join(ROOT, "fuzz")
HARNESS = os.path.join(FUZZ, "harness.py")
FINDINGS = os.path.join(FUZZ, "findings")

#: format -> executions of the in-suite run (a few seconds each on one core)
RUNS = {
    "pickle": 600,
    "npy": 600,
    "npz": 400,
    "safetensors": 600,
    "msgpack": 600,
    "equinox": 800,
    "orbax": 150,
    "torch": 400,
}
SEED = 15


def _env(tmp_path: os.PathLike) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TREETOOL_FUZZ_SKIP"}
    env.update(PYTHONHASHSEED="0", TMPDIR=str(tmp_path), JAX_PLATFORMS="cpu")
    return env


def _seeds(fmt: str) -> list[str]:
    d = os.path.join(FUZZ, "corpus", fmt)
    return sorted(os.listdir(d))


def _module(name: str, path: str) -> types.ModuleType:
    """The module at `path`, imported under `name` (fuzz/ and tests/hostile/ are not packages)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_harness_helpers():
    """The orbax archive form, the finding signatures, the terminal-text check (doctests)."""
    harness = _module("fuzz_harness", HARNESS)
    result = doctest.testmod(harness)
    assert result.failed == 0
    assert result.attempted >= 5


def test_corpus_is_small_and_covers_every_format():
    sizes = {}
    for fmt in RUNS:
        d = os.path.join(FUZZ, "corpus", fmt)
        sizes[fmt] = [os.path.getsize(os.path.join(d, n)) for n in _seeds(fmt)]
    assert all(len(s) >= 2 for s in sizes.values()), sizes
    assert max(max(s) for s in sizes.values()) <= 16 * 1024
    assert sum(sum(s) for s in sizes.values()) < 1 << 20


def _bounded_run(fmt: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    work, art = tmp_path / "work", tmp_path / "artifacts"
    work.mkdir()
    art.mkdir()
    cmd = [
        sys.executable,
        HARNESS,
        fmt,
        f"-runs={RUNS[fmt]}",
        f"-seed={SEED}",
        "-timeout=20",
        "-rss_limit_mb=2048",
        "-max_len=65536",
        "-print_final_stats=1",
        f"-artifact_prefix={art}{os.sep}",
        str(work),
        os.path.join(FUZZ, "corpus", fmt),
    ]
    env = _env(tmp_path)
    env["TREETOOL_FUZZ_SKIP"] = _known_signatures()  # classes whose fixes are not merged yet
    return subprocess.run(
        small_parent(cmd), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def bounded_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[subprocess.CompletedProcess[str], Path]]:
    """fmt -> (its run, the run's folder) for each selected format: each run is its own
    libFuzzer process as before, run side by side (as many at once as there are cores) when
    the first format's test asks; a run's executions and seed do not depend on its neighbours."""
    fmts = sorted(
        {
            item.callspec.params["fmt"]
            for item in request.session.items
            if item.path == request.path
            and getattr(item, "originalname", "") == "test_bounded_seeded_run_finds_nothing"
        }
    )
    dirs = [tmp_path_factory.mktemp(f"fuzz-{fmt}") for fmt in fmts]
    runs = together(*(functools.partial(_bounded_run, f, d) for f, d in zip(fmts, dirs)))
    return {fmt: (run, d) for fmt, run, d in zip(fmts, runs, dirs)}


# the first format's test waits for every run: a longer limit than one run's
@pytest.mark.timeout(900)
@pytest.mark.parametrize("fmt", sorted(RUNS))
def test_bounded_seeded_run_finds_nothing(fmt, bounded_runs):
    proc, tmp_path = bounded_runs[fmt]
    art, runs = tmp_path / "artifacts", RUNS[fmt]
    found = sorted(os.listdir(art))
    if proc.returncode != 0 or found:
        shown = {n: base64.b64encode((art / n).read_bytes()[:4096]).decode() for n in found}
        pytest.fail(
            f"{fmt}: finding (rc={proc.returncode}); inputs (base64): {shown}\n"
            f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    out = proc.stderr
    # every seed was read and loaded, and the run did its executions with coverage feedback
    assert re.search(rf"INFO:\s+{len(_seeds(fmt))} files found in ", out), out[-3000:]
    assert f"Done {runs} runs" in out
    cov = int(re.search(r"INITED cov: (\d+)", out).group(1))
    assert cov > 300  # treetool's reading and rendering code is instrumented
    executed = int(re.search(r"stat::number_of_executed_units: (\d+)", out).group(1))
    assert executed >= runs
    assert os.listdir(tmp_path / "work")  # new coverage was found and kept
    # nothing written outside the run's folders but the harness's own scratch directory
    others = sorted(set(os.listdir(tmp_path)) - {"work", "artifacts"})
    assert len(others) <= 1 and all(n.startswith("treetool-fuzz-") for n in others), others


def _known_lines() -> list[tuple[str, str, str]]:
    """`(format/name, signature, reason)` of each list line of fuzz/findings/KNOWN.md."""
    out = []
    path = os.path.join(FINDINGS, "KNOWN.md")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                m = re.match(r"- `([\w.-]+/[\w.-]+)` \[(\S+)\]: (.+)", line.strip())
                if m:
                    out.append(m.groups())
    return out


def _known() -> dict[str, str]:
    """`format/name` -> reason."""
    return {key: reason for key, _, reason in _known_lines()}


def _known_signatures() -> str:
    return ",".join(sorted({sig for _, sig, _ in _known_lines()}))


def _reproducers() -> list[tuple[str, str]]:
    if not os.path.isdir(FINDINGS):
        return []
    return [
        (fmt, name)
        for fmt in sorted(os.listdir(FINDINGS))
        if os.path.isdir(os.path.join(FINDINGS, fmt))
        for name in sorted(os.listdir(os.path.join(FINDINGS, fmt)))
    ]


def _params() -> list:
    known = _known()
    out = []
    for fmt, name in _reproducers():
        key = f"{fmt}/{name}"
        marks = [pytest.mark.xfail(reason=known[key], strict=False)] if key in known else []
        out.append(pytest.param(fmt, name, id=key, marks=marks))
    return out


def test_known_list_names_only_kept_reproducers():
    kept = {f"{fmt}/{name}" for fmt, name in _reproducers()}
    lines = _known_lines()
    with open(os.path.join(FINDINGS, "KNOWN.md"), encoding="utf-8") as fh:
        listed = [line for line in fh if line.startswith("- `")]
    assert len(lines) == len(listed), "a KNOWN.md list line does not parse"
    assert {key for key, _, _ in lines} <= kept
    assert all("@" in sig for _, sig, _ in lines)


_REPLAYED: dict[str, dict[str, str]] = {}


def _replay(fmt: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """One subprocess per format replays all its reproducers: name -> "ok" or the error."""
    if fmt not in _REPLAYED:
        d = os.path.join(FINDINGS, fmt)
        names = sorted(os.listdir(d))
        tmp = tmp_path_factory.mktemp(f"replay-{fmt}")
        proc = subprocess.run(
            [sys.executable, HARNESS, fmt, "--replay", *(os.path.join(d, n) for n in names)],
            cwd=tmp,
            env=_env(tmp),
            capture_output=True,
            text=True,
            timeout=120,
        )
        said = {}
        for line in proc.stdout.splitlines():
            path, _, what = line.partition(": ")
            said[os.path.basename(path)] = what
        _REPLAYED[fmt] = {n: said.get(n, f"no result (rc={proc.returncode})") for n in names}
        _REPLAYED[fmt]["\0stderr"] = proc.stderr
    return _REPLAYED[fmt]


@pytest.mark.parametrize(("fmt", "name"), _params())
def test_reproducer_is_contained(fmt, name, tmp_path_factory):
    results = _replay(fmt, tmp_path_factory)
    what, stderr = results[name], results["\0stderr"]
    assert not what.startswith(("FINDING", "no result")), f"{fmt}/{name}: {what}\n{stderr[-4000:]}"
    # contained: it either loaded and rendered every view, or was refused with a LoadError
    assert what[:1] in "'\"" and what[1:].startswith(("loaded as", "LoadError: ")), what


@pytest.mark.parametrize(("fmt", "name"), _params())
def test_reproducer_through_the_cli(fmt, name, tmp_path):
    """`treetool inspect --json` on each reproducer, then `summary`, and `get` on its first
    leaf: each succeeds or says one line that names the file, exit 2, within the hostile-file
    bounds (tests/hostile/harness.py)."""
    hostile = _module("hostile_harness", os.path.join(ROOT, "tests", "hostile", "harness.py"))
    src = os.path.join(FINDINGS, fmt, name)
    target = tmp_path / "input"
    if fmt == "orbax":  # the harness's archive form: unpack it into a checkpoint directory
        fuzz_harness = _module("fuzz_harness", HARNESS)
        with open(src, "rb") as fh:
            files = fuzz_harness.orbax_files(fh.read())
        for rel, content in files:
            path = target.joinpath(*rel.split("/"))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
    else:
        with open(src, "rb") as fh:
            target.write_bytes(fh.read())
    # the error names the target as typed (a member in brackets), or, for an orbax array, its
    # directory under the target
    prefixes = tuple(f"treetool: error: {t}" for t in ("input: ", "input[", f"{target}/"))
    run = hostile.run_cli("inspect", "--json", "input", cwd=tmp_path, allow_writes=["input"])
    hostile.assert_contained(run, rc=(0, 2))
    if run.rc == 2:
        assert run.stderr.startswith(prefixes), run.stderr
        return
    leaves = json.loads(run.stdout)["leaves"]
    more = [("summary", "input")]
    if leaves:  # `treetool get --stats` on the first leaf reads all of its array data
        more.append(("get", "input", leaves[0]["path"], "--stats"))
    runs = together(  # independent runs (that write nothing), side by side
        *(
            functools.partial(hostile.run_cli, *args, cwd=tmp_path, allow_writes=["input"])
            for args in more
        )
    )
    for run in runs:
        hostile.assert_contained(run, rc=(0, 2))
        if run.rc == 2:
            assert run.stderr.startswith(prefixes), run.stderr
