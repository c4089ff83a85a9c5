"""Coverage-guided fuzzing of treetool's checkpoint readers (atheris / libFuzzer).

One entry per format; each turns the fuzzer's bytes into a file (or, for orbax, a checkpoint
directory), reads it with `treetool.io.read` exactly as the CLI does (format detected from the
content; when that fails, again with `partial=True`, as `--partial` does), and, when it loads,
renders it every way a user can see it: the rich tree (`tt.render`), the `inspect --json`
listing, `tt.summary` (rich, `to_dict` and HTML), the HTML tree, and `treetool get` on its
first leaves (facts, stats, values: the array data is read from the file). Reading may raise
`treetool.LoadError` and nothing else; rendering may raise nothing; no temporary file may be
left behind. Anything else is a finding: the harness raises it and libFuzzer saves the input
as `crash-<sha1>` (a hang as `timeout-…`, a memory bomb as `oom-…`).

Usage (see fuzz/README.md):

    python fuzz/harness.py FORMAT [libFuzzer flags] [CORPUS_DIR ...]
    python fuzz/harness.py pickle -runs=2000 -seed=1 /tmp/work-corpus fuzz/corpus/pickle

    python fuzz/harness.py FORMAT --replay FILE ...   # one input, the exception in full

    python fuzz/harness.py FORMAT --remote [...]      # the input served by a fuzzed server

`--remote` (every format but orbax, `fuzz/remote.py`): the input's first 8 bytes script a
local HTTP server (honest answers, 5xx/4xx, wrong `Content-Range`, short and long bodies,
redirects, dropped connections) and the rest is the file it serves; the reader reads it by URL
through its ranged reads. A connection to any other port is a finding too.

With `TREETOOL_FUZZ_TERMSAFE=1`, text bound for a terminal (the rich views and LoadError
messages) holding a control, DEL, C1 or bidi-override character is a finding too.

FORMAT is one of: pickle, npy, npz, safetensors, msgpack, equinox, orbax, torch.

Resource guards: unless the command line says otherwise, `-timeout=10 -rss_limit_mb=2048
-max_len=65536`, and the process's address space is capped at 4 GiB; a `LoadError` raised
because of a `MemoryError` is a finding too (on inputs of at most 64 KB, a reader whose
budgets work never gets that far).

Each format's libFuzzer dictionary, `fuzz/dicts/<format>.dict` (opcodes, magic numbers, header
keys), is passed unless the command line gives `-dict=`.

Only treetool is instrumented for coverage (`atheris.instrument_imports(include=["treetool"])`
around eager imports of the reading and rendering modules); numpy, rich and the standard
library run uninstrumented.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import sys
import tempfile
import traceback
from typing import Any

FORMATS = ("pickle", "npy", "npz", "safetensors", "msgpack", "equinox", "orbax", "torch")

#: the file name each format's input is written to (detection reads content, not names)
_FILE_NAME = {
    "pickle": "input.pkl",
    "npy": "input.npy",
    "npz": "input.npz",
    "safetensors": "input.safetensors",
    "msgpack": "input.msgpack",
    "equinox": "input.eqx",
    "torch": "input.pt",  # a torch zip or legacy file (the zip and legacy readers)
}

#: orbax inputs are a small archive of files: sections split by this marker, each
#: `RELATIVE/PATH\n` then the file's bytes (see `orbax_files` and make_corpus.py)
ORBAX_SEP = b"\n\x00--treetool-fuzz-file--\x00\n"
_MAX_ORBAX_FILES = 64

#: modules imported (and so instrumented) before fuzzing starts: the readers and every
#: renderer a loaded tree goes through
_MODULES = (
    "treetool",
    "treetool.io",
    "treetool.io.pickle",
    "treetool.io.npz",
    "treetool.io.safetensors",
    "treetool.io.msgpack",
    "treetool.io.equinox",
    "treetool.io.orbax",
    "treetool.io.torch",
    "treetool.io._torch._archive",
    "treetool.io._torch._legacy",
    "treetool.cli",
    "treetool._tree._rich",
    "treetool._display._html",
    "treetool._tree._html",
    "treetool._summary._html",
    "treetool._sharding._html",
    "treetool._summary._rich",
    "treetool._tree._leaf_report",
    "treetool._summary._summary",
)


def orbax_files(data: bytes) -> list[tuple[str, bytes]]:
    """The `(relative path, content)` pairs an orbax input describes; unsafe names dropped.

    A name is kept when each of its (at most 4) parts is made of letters, digits, `_`, `-`
    and `.` and is not `.` or `..`; so the fuzzer can add, drop and rename files (`_METADATA`,
    `_CHECKPOINT_METADATA`, `_sharding`, `<param>/.zarray`, …) but never write outside the
    checkpoint directory.

    Example:
        >>> orbax_files(b"_METADATA\\n{}" + ORBAX_SEP + b"../x\\n1" + ORBAX_SEP + b"a/.zarray\\n{}")
        [('_METADATA', b'{}'), ('a/.zarray', b'{}')]
    """
    out = []
    for section in data.split(ORBAX_SEP)[:_MAX_ORBAX_FILES]:
        name, _, content = section.partition(b"\n")
        try:
            rel = name.decode("ascii")
        except UnicodeDecodeError:
            continue
        parts = rel.split("/")
        ok = 0 < len(parts) <= 4 and all(
            p not in ("", ".", "..") and len(p) <= 64 and all(c.isalnum() or c in "_-." for c in p)
            for p in parts
        )
        if ok:
            out.append((rel, content))
    return out


_ROOT_PREFIX = "treetool-fuzz-"


def _remove_stale_roots() -> None:
    """Remove the directories of harness processes that have ended.

    libFuzzer ends the process with C `exit()`, so Python's `atexit` never runs: each run
    clears what earlier, finished runs left in the temporary directory.
    """
    base = tempfile.gettempdir()
    for name in os.listdir(base):
        pid = name[len(_ROOT_PREFIX) :].partition("-")[0]
        if not name.startswith(_ROOT_PREFIX) or not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)
        except PermissionError:
            pass  # another user's live process


class Harness:
    """Reads and renders one input at a time inside a private temporary directory."""

    def __init__(self, fmt: str, remote: bool = False) -> None:
        if fmt not in FORMATS:
            raise SystemExit(f"harness: unknown format {fmt!r}; formats: {', '.join(FORMATS)}")
        if remote and fmt == "orbax":
            raise SystemExit("harness: --remote serves one file; orbax is a directory")
        self.fmt = fmt
        #: remote mode (`--remote`, fuzz/remote.py): a fuzzed server answers the ranged reads
        self.remote = None
        if remote:
            here = os.path.dirname(os.path.abspath(__file__))
            if here not in sys.path:
                sys.path.insert(0, here)
            import remote as _remote_mode  # fuzz/remote.py, next to this file

            os.environ.setdefault("TREETOOL_REMOTE_TIMEOUT", "2")
            os.environ.setdefault("TREETOOL_REMOTE_RETRIES", "2")
            self.other = _remote_mode.Listener()
            self.remote = _remote_mode.FuzzedServer(self.other.port)
            self.inputs = 0
        _remove_stale_roots()
        self.root = tempfile.mkdtemp(prefix=f"{_ROOT_PREFIX}{os.getpid()}-")
        # readers that need scratch files (npz members) get them here, not in the shared /tmp
        self.scratch = os.path.join(self.root, "tmp")
        os.mkdir(self.scratch)
        tempfile.tempdir = self.scratch
        self.target = os.path.join(self.root, "ckpt" if fmt == "orbax" else _FILE_NAME[fmt])
        #: signatures of findings not to report again (`TREETOOL_FUZZ_SKIP`, comma-separated)
        self.skip = frozenset(filter(None, os.environ.get("TREETOOL_FUZZ_SKIP", "").split(",")))

    def write(self, data: bytes) -> str:
        """Put the input where the reader will find it; return where that is (a path, or in
        remote mode a URL of its own: sources are cached by URL)."""
        if self.remote is not None:
            self.remote.serve(data)
            self.inputs += 1
            return f"{self.remote.url}/{self.inputs}"
        self._write_file(data)
        return self.target

    def _write_file(self, data: bytes) -> None:
        if self.fmt != "orbax":
            with open(self.target, "wb") as fh:
                fh.write(data)
            return
        if os.path.isdir(self.target):
            shutil.rmtree(self.target)
        os.mkdir(self.target)
        for rel, content in orbax_files(data):
            path = os.path.join(self.target, *rel.split("/"))
            if os.path.isdir(path):
                continue  # a name already used as a directory
            parent = os.path.dirname(path)
            try:
                os.makedirs(parent, exist_ok=True)
                with open(path, "wb") as fh:
                    fh.write(content)
            except (FileExistsError, NotADirectoryError):
                continue  # a directory wanted where a file already is

    def one(self, data: bytes) -> str:
        """Read and render one input and say what happened; raise on any finding.

        A finding whose `signature` is in `skip` is not raised (`"skipped: SIGNATURE"`): a
        long campaign goes on past the classes it has already found.
        """
        try:
            return self._one(data)
        except Exception as e:
            sig = signature(e)
            if sig in self.skip:
                return f"skipped: {sig}"
            raise

    def _one(self, data: bytes) -> str:
        import treetool.io
        from treetool import LoadError

        self._clear_scratch()
        target = self.write(data)
        try:
            loaded = treetool.io.read(target)
        except LoadError as e:
            if isinstance(e.__context__, MemoryError):  # no budget tripped before the allocation
                raise Finding("out-of-memory", f"on a {len(data)}-byte input: {e}") from e
            loaded, said = None, f"LoadError: {e}"
            if _TERMSAFE:
                check_terminal_text(str(e), "LoadError message")
            try:  # what `--partial` shows: the tree read up to the error
                loaded = treetool.io.read(target, partial=True)
            except LoadError:
                pass
        if loaded is not None:
            if loaded.error is None:
                said = f"loaded as {loaded.format}, rendered"
            else:
                said += f" (--partial: {loaded.format} tree read up to the error, rendered)"
            render_all(loaded.tree, loaded.format)
            del loaded
        if self.remote is not None and self.other.accepted:
            raise Finding("other-host", f"{self.other.accepted} connections to another port")
        left = self._clear_scratch()
        if left:
            raise Finding("temp-files", f"the reader left {len(left)} behind: {left[:3]}")
        return said

    def _clear_scratch(self) -> list[str]:
        left = sorted(os.listdir(self.scratch))
        for name in left:
            p = os.path.join(self.scratch, name)
            if os.path.isdir(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)
        return left


def signature(e: BaseException) -> str:
    """The class of a finding: the exception type and the innermost treetool function.

    Line numbers are left out, so a signature survives edits elsewhere in the reader. When no
    treetool frame is left (rich rendering a str lazily), the innermost library function.

    Example:
        >>> try:
        ...     {}["x"]
        ... except KeyError as e:
        ...     signature(e)
        'KeyError@?'
        >>> signature(Finding("temp-files", "the reader left 1 behind: ['tmpx.pkl']"))
        'Finding[temp-files]@?'
    """
    t = type(e)
    name = t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"
    if isinstance(e, Finding):
        name = f"Finding[{e.kind}]"
        e = e.__cause__ or e  # where the memory error came from
    where = last = "?"
    tb = e.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename.replace(os.sep, "/")
        if "site-packages/" in filename:
            last = f"{filename.rpartition('site-packages/')[2]}:{tb.tb_frame.f_code.co_name}"
        if "/treetool/" in filename or "/tui/" in filename:
            rel = (
                filename[filename.rindex("/treetool/") + 1 :]
                if "/treetool/" in filename
                else filename
            )
            where = f"{rel}:{tb.tb_frame.f_code.co_name}"
        tb = tb.tb_next
    if where == "?":  # raised in a library (rich) that treetool called lazily: its
        where = last  # generator frames are gone
    return f"{name}@{where}"


class Finding(Exception):
    """Something the harness itself checks went wrong (not an exception from treetool).

    `kind` names the check (`out-of-memory`, `temp-files`, `unsafe-text`); it is part of the
    finding's `signature`.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


#: with TREETOOL_FUZZ_TERMSAFE=1, terminal text (the rich views, LoadError messages) must hold
#: no control character but a newline, no DEL, no C1 control and no bidi override
_TERMSAFE = os.environ.get("TREETOOL_FUZZ_TERMSAFE") == "1"
_UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def check_terminal_text(text: str, what: str) -> None:
    r"""Raise `Finding` if `text` would reach a terminal with an unsafe character.

    Example:
        >>> check_terminal_text("['a']  f32[2]\n", "tree")
        >>> try:
        ...     check_terminal_text("['\x1b[2J']", "tree")
        ... except Finding as e:
        ...     print(e)
        tree: unsafe character '\x1b' at 2: "['\x1b[2J']"
    """
    m = _UNSAFE.search(text)
    if m:
        near = text[max(0, m.start() - 30) : m.start() + 30]
        raise Finding(
            "unsafe-text", f"{what}: unsafe character {m.group()!r} at {m.start()}: {near!r}"
        )


def render_all(tree: Any, fmt: str) -> None:
    """Every view of a loaded tree, written to memory: the rich tree, `--json`, summary, HTML,
    and `treetool get` on the first leaves."""
    from rich.console import Console

    import treetool as tt
    from treetool._cli import _json as cli
    from treetool._display._html import to_html

    out = io.StringIO()
    console = Console(file=out, width=100, color_system=None, force_terminal=False, highlight=False)
    console.print(tt.render(tree))
    s = tt.summary(tree)
    console.print(s)
    s.to_dict()
    listing = cli._json_listing(tree, fmt, None)
    real_stdout, sys.stdout = sys.stdout, io.StringIO()
    try:
        cli._print_json(listing)  # exactly what `treetool inspect --json FILE` prints
    finally:
        sys.stdout = real_stdout
    to_html(tree)
    to_html(s)
    _get_leaves(tree, console)
    if _TERMSAFE:
        check_terminal_text(out.getvalue(), "rich views")


#: leaves whose data `treetool get` is made to read, per input
_GET_LEAVES = 8


def _get_leaves(tree: Any, console: Any) -> None:
    """`treetool get` on the first leaves: facts, stats, histogram, values (the data is read).

    Reading an array's data from the file may raise `LoadError` (a truncated payload), and
    nothing else; the flat walk raises `NodeError` at a node it cannot open (a dict whose keys
    cannot be sorted, as in jax), which `treetool get` reports as one line.
    """
    import itertools

    import treetool as tt
    from treetool import LoadError
    from treetool._tree._leaf_report import leaf_report

    try:
        first = list(itertools.islice(tt.leaves_with_path(tree), _GET_LEAVES))
    except tt.NodeError:
        return
    for path, value in first:
        report = leaf_report(path, value)
        try:
            report.to_dict()
            console.print(report)
        except LoadError:
            continue


def _instrument() -> None:
    import atheris

    with atheris.instrument_imports(include=["treetool"]):
        import importlib

        for name in _MODULES:
            importlib.import_module(name)


#: the address space of a harness process: an allocation past it fails at once (a MemoryError,
#: reported as a finding) instead of taking the machine down before `-rss_limit_mb` looks
ADDRESS_SPACE = 4 << 30
#: libFuzzer flags the harness adds when the command line does not give them
DEFAULT_FLAGS = {"-timeout": "10", "-rss_limit_mb": "2048", "-max_len": "65536"}


def _limit_memory() -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft > ADDRESS_SPACE:
        limit = ADDRESS_SPACE if hard == resource.RLIM_INFINITY else min(ADDRESS_SPACE, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def replay(fmt: str, paths: list[str], remote: bool = False) -> int:
    """Run inputs once each and print what happens; exit 1 if any is a finding.

    Each input gets 20 s and the process `ADDRESS_SPACE`: a hang is reported as a
    `TimeoutError` finding, a memory bomb as a `MemoryError` or an out-of-memory finding.
    """
    import signal

    _limit_memory()

    def _timeout(signum: int, frame: Any) -> None:
        raise TimeoutError("the input took more than 20 s")

    signal.signal(signal.SIGALRM, _timeout)
    h = Harness(fmt, remote=remote)
    bad = 0
    for p in paths:
        with open(p, "rb") as fh:
            data = fh.read()
        signal.alarm(20)
        try:
            said = h.one(data)
        except Exception as e:
            bad += 1
            print(f"{p}: FINDING {signature(e)}")
            traceback.print_exc()
        else:
            print(f"{p}: {said[:200]!a}")
        finally:
            signal.alarm(0)
    shutil.rmtree(h.root, ignore_errors=True)
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    """`harness.py FORMAT [--remote] [--replay FILE ... | libFuzzer args]`."""
    remote = "--remote" in argv[2:3]
    if remote:
        argv = [*argv[:2], *argv[3:]]
    if len(argv) < 2 or argv[1] not in FORMATS:
        print(__doc__, file=sys.stderr)
        return 2
    fmt = argv[1]
    if len(argv) > 2 and argv[2] == "--replay":
        return replay(fmt, argv[3:], remote)
    import atheris

    _instrument()
    h = Harness(fmt, remote=remote)

    def test_one_input(data: bytes) -> None:
        h.one(data)

    _limit_memory()
    flags = argv[2:]
    given = {f.partition("=")[0] for f in flags}
    flags = [f"{k}={v}" for k, v in DEFAULT_FLAGS.items() if k not in given] + flags
    words = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dicts", f"{fmt}.dict")
    if os.path.exists(words) and not any(f.startswith("-dict=") for f in flags):
        flags = [f"-dict={words}", *flags]  # the format's magic numbers, opcodes and keys
    atheris.Setup([argv[0], *flags], test_one_input)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
