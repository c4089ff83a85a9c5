"""The `Format` protocol and the one ordered table of formats.

A format is an object with a `name`, a `sniff(probe)` that says from a file's content whether
the file is in that format, an optional `guess(probe)` for headerless variants (tried only
when no format's `sniff` claimed the file), and a `read(src, options)` that returns a
`Loaded`. Each reader module defines its `Format` (`FORMAT = Format("npz", sniff, read)`);
`TABLE` lists them in the order detection asks them, with the first bytes a file of that
format may start with, so that detection imports a reader module only for files it could
read (`treetool ls model.safetensors` imports no other reader).

Adding a format is one module (its reader and `FORMAT`) and one row here.

Example:
    >>> [row.name for row in TABLE][:3]
    ['orbax', 'dcp', 'torch']
    >>> format_for("safetensors").name
    'safetensors'
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from treetool._errors import LoadError
from treetool._source import Source, is_url, source_for
from treetool.io._loaded import Loaded
from treetool.io._partial import PartialWatch

__all__ = ["TABLE", "Format", "Probe", "ReadOptions", "Row", "format_for", "names"]


#: bytes of the file's start every sniffer may look at (`Probe.head`)
HEAD_BYTES = 64


class Probe:
    """What detection knows of a target: its name, `Source`, whether it is a directory (a
    local one, or a remote prefix), and its first `HEAD_BYTES` bytes (read once, on demand).

    Example:
        >>> import os, tempfile
        >>> p = os.path.join(tempfile.mkdtemp(), "x.bin")
        >>> with open(p, "wb") as fh:
        ...     _ = fh.write(b"\\x93NUMPY...")
        >>> probe = Probe(p)
        >>> probe.is_dir, probe.head[:6]
        (False, b'\\x93NUMPY')
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.remote = is_url(path)
        self.src: Source = source_for(path)
        # cached by hand: `functools.cached_property` holds one lock per property for every
        # instance (Python < 3.12), so two reads at once (a diff's sides) would wait on it
        self._is_dir: bool | None = None
        self._head: bytes | None = None

    @property
    def is_dir(self) -> bool:
        """A local directory, or a URL that names a prefix (no object of that name)."""
        if self._is_dir is None:
            self._is_dir = self._find_is_dir()
        return self._is_dir

    def _find_is_dir(self) -> bool:
        if not self.remote:
            return os.path.isdir(self.path)
        try:
            _ = self.src.size
        except LoadError as e:
            if "a prefix (directory)" in str(e):
                return True
            if "no such object" in str(e) and _has_entries(self.src):
                return True
            raise
        return False

    @property
    def head(self) -> bytes:
        """The file's first bytes (fewer for a smaller file)."""
        if self._head is None:
            try:
                head = self.src.read(0, min(HEAD_BYTES, self.src.size))
            except OSError as e:
                raise LoadError(f"{self.path}: {e.strerror or e}") from None
            if not head:
                raise LoadError(f"{self.path}: empty file")
            self._head = head
        return self._head


def _has_entries(src: Source) -> bool:
    """Whether objects lie under the prefix `src`: its flat listing, which the orbax reader
    then reuses (one listing for both), where the client has one."""
    walk = getattr(src, "walk", None)
    if walk is not None:
        return bool(walk())
    return bool(src.list())


@dataclass(frozen=True)
class ReadOptions:
    """What `read` was asked for, handed to every format's `read` (a format ignores what does
    not apply to it: `like` is equinox's, `watch` pickle's, `step` orbax's).

    Attributes:
        trust: run the file's code (pickle only; the other formats refuse or ignore it).
        lazy: keep array payloads in the file as `LazyArray` leaves.
        like: a skeleton tree to fill (equinox).
        partial: on a damaged file, return what was read up to the error (`Loaded.error`).
        step: the step of an orbax run (`run@STEP`), None for the latest.
        watch: a `PartialWatch` handing out snapshots of a read in progress (pickle).
        raw: show a pickled object as it is stored (torch: a whole `nn.Module` or a
            TorchScript archive by its attributes, not its `state_dict()` names).
    """

    trust: bool = False
    lazy: bool = True
    like: Any = None
    partial: bool = False
    step: int | None = None
    watch: PartialWatch | None = None
    raw: bool = False


def _never(probe: Probe) -> bool:
    return False


@dataclass(frozen=True)
class Format:
    """One checkpoint format: its name, how to recognise it, how to read it.

    Attributes:
        name: the format's name (`Loaded.format`, `read(format=...)`).
        sniff: whether a file is of this format, from its content (`Probe`: the first bytes,
            the `Source`, whether it is a directory); never from the file name.
        read: `read(src, options) -> Loaded`, over the file's `Source`.
        guess: for formats with a headerless variant (protocol 0/1 pickles, torch's old tar
            files): asked in table order only after no format's `sniff` claimed the file.
        expects: for a format of directories, what one holds (said when a directory is not
            of any format).
    """

    name: str
    sniff: Callable[[Probe], bool]
    read: Callable[[Source, ReadOptions], Loaded]
    guess: Callable[[Probe], bool] = _never
    expects: str = ""


@dataclass(frozen=True)
class Row:
    """A row of `TABLE`: the format `name`, the `module` whose `attr` is its `Format`, and
    which targets it may read: files starting with one of `magic` (None: any file), and
    directories (local, or remote prefixes) when `dirs`; `guesses` when its `guess` may claim
    a file no `sniff` did."""

    name: str
    module: str
    magic: tuple[bytes, ...] | None = None
    dirs: bool = False
    files: bool = True
    guesses: bool = False
    attr: str = "FORMAT"

    def admits(self, probe: Probe) -> bool:
        """Whether the format could read this target, from what the probe knows (no import)."""
        if probe.is_dir:
            return self.dirs
        if not self.files:
            return False
        return self.magic is None or probe.head.startswith(self.magic)

    def format(self) -> Format:
        """The row's `Format` (its module imported on first use)."""
        fmt = getattr(importlib.import_module(self.module), self.attr)
        assert isinstance(fmt, Format) and fmt.name == self.name, (self.module, self.attr)
        return fmt


_ZIP = (b"PK\x03\x04", b"PK\x05\x06")
_NPY = (b"\x93NUMPY",)
_MSGPACK_MAPS = tuple(bytes([b]) for b in (*range(0x80, 0x90), 0xDE, 0xDF))

#: Every format, in the order detection asks them. Order matters where two formats' first
#: bytes agree: a torch zip before npz (both are zips; torch's has `<root>/data.pkl`), equinox
#: (a sequence of npy records) before npy, safetensors (a header length whose low byte may be
#: 0x80) before pickle, pickle (PROTO n, then an opcode) before msgpack (0x80 is also an empty
#: msgpack map).
TABLE: tuple[Row, ...] = (
    Row("orbax", "treetool.io.orbax", dirs=True, files=False),
    Row("dcp", "treetool.io.dcp", dirs=True, files=False),
    Row("torch", "treetool.io.torch", magic=(*_ZIP, b"\x80\x02\x8a\x0a"), guesses=True),
    Row("equinox", "treetool.io.equinox", magic=_NPY),
    Row("npy", "treetool.io.npz", magic=_NPY, attr="NPY_FORMAT"),
    Row("npz", "treetool.io.npz", magic=_ZIP),
    Row("gguf", "treetool.io.gguf", magic=(b"GGUF",)),
    Row("safetensors", "treetool.io.safetensors"),
    Row("pickle", "treetool.io.pickle", magic=(b"\x80",), guesses=True),
    Row("msgpack", "treetool.io.msgpack", magic=_MSGPACK_MAPS),
    Row("sharded", "treetool.io.sharded"),
)
_BY_NAME = {row.name: row for row in TABLE}


def names() -> list[str]:
    """The format names, sorted (what `read(format=...)` accepts).

    Example:
        >>> names()
        ['dcp', 'equinox', 'gguf', 'msgpack', 'npy', 'npz', 'orbax', 'pickle', 'safetensors', 'sharded', 'torch']
    """
    return sorted(_BY_NAME)


def format_for(name: str, where: str = "") -> Format:
    """The `Format` called `name`; an unknown name is one `LoadError` line (with a guess).

    Example:
        >>> format_for("pikle", "x.bin")
        Traceback (most recent call last):
        ...
        treetool.LoadError: x.bin: unknown format 'pikle'. Did you mean 'pickle'?
    """
    row = _BY_NAME.get(name)
    if row is None:
        from treetool._paths._match import suggest

        hint = suggest(name, _BY_NAME)
        more = f" Did you mean {hint[0]!r}?" if hint else ""
        raise LoadError(f"{where}: unknown format {name!r}.{more}")
    return row.format()
