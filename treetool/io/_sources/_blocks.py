"""`BlockReader`: a seekable, read-ahead file over a remote `Source`'s ranged reads.

Remote sources (`treetool.io._sources._remote`) open their bytes as one: small reads come from
cached blocks, big ones are streamed ahead, and a walk's repeating jumps are read ahead in
parallel on this module's pools (`prefetcher`, `guesser`).
"""

from __future__ import annotations

import io
import itertools
import threading
import time
from typing import Any

from treetool._source import Source
from treetool.io._sources._pool import Pool

__all__ = ["BlockReader", "guesser", "prefetcher"]

#: threads reading a walk's predicted blocks (16 KiB each: many in flight cost little memory)
GUESS_WORKERS = 128
_ahead: Pool | None = None
_guess: Pool | None = None
_pool_lock = threading.Lock()


def prefetcher() -> Pool:
    """The pool that reads ahead for streamed reads (its tasks may use the remote chunk pool;
    its threads start without a wait: `_pool`)."""
    global _ahead
    with _pool_lock:
        if _ahead is None:
            _ahead = Pool(8)
        return _ahead


def guesser() -> Pool:
    """The pool that reads the blocks a walk's jumps are predicted to land in (small reads;
    its tasks submit nothing; its threads start without a wait: `_pool`)."""
    global _guess
    with _pool_lock:
        if _guess is None:
            _guess = Pool(GUESS_WORKERS)
        return _guess


#: blocks read ahead in parallel once the jumps of a walk repeat a pattern (and the most
#: big reads of a stream asked for ahead)
_AHEAD_JUMPS = 8
#: a walk whose guesses keep landing reads further ahead, up to this many blocks (at most 4
#: per guessed block it already used, 8 at first, `_SPECULATE` on a first jump guessed to
#: repeat: the blocks read for nothing stay below 3 per block used + 8, or + `_SPECULATE`
#: after that guess, see `BlockReader.issued`), so that the 129 requests of a pickle of 128
#: arrays wait for 3 round trips one after the other, not 10 (each block is 16 KiB: 2 MiB in
#: flight at most, on as many threads: `GUESS_WORKERS`)
_AHEAD_WALK = 128
#: a walk's first jump past a payload this big (from a reader that read from the start) is
#: guessed to repeat at once: the next `_SPECULATE` landings are read ahead, each a skip
#: further (a checkpoint's layers share a shape), before a second jump could confirm it; at
#: most once per reader, so a wrong guess costs those blocks once
_SPECULATE_MIN = 1 << 20
#: landings read ahead on that guess: 32 blocks of 16 KiB, a skip of at least 1 MiB apart and
#: none past the end, so a wrong guess reads less than 2% of the file for nothing, once; when
#: it lands, the 4 more per landed block cover a pickle of 128 arrays in one more round trip
#: (8 took two more)
_SPECULATE = 32
#: a predicted block starts this many bytes before the predicted landing
_SLACK = 512
#: two landing steps this close count as the same step of a pattern (the records between
#: payloads grow by a few bytes as keys and memo indices get longer)
_DRIFT = _SLACK // 2
#: how far ahead a stream of big reads is asked for
_AHEAD_BYTES = 8 << 20
#: the longest repeating pattern of jumps recognised (arrays per layer)
_PERIOD_MAX = 16
#: blocks are read ahead only when a request takes this long (a network, not a local server,
#: where the threads would cost more than they save); a source's `ahead_latency` overrides it
_SLOW_REQUEST = 0.004


def _steady(steps: list[int]) -> list[int]:
    """The last steps that are all within `_DRIFT` bytes of the last one (a walk over
    payloads of one size whose records differ by a few bytes).

    Example:
        >>> _steady([5, 24061, 24055, 24055, 24064])
        [24061, 24055, 24055, 24064]
    """
    if not steps:
        return []
    last = steps[-1]
    k = len(steps)
    while k > 0 and abs(steps[k - 1] - last) <= _DRIFT:
        k -= 1
    return steps[k:]


class BlockReader(io.RawIOBase):
    """A seekable, read-ahead file over a `Source`'s ranged reads, also usable as a buffer.

    Small reads are served from cached blocks (the first one bigger, so that a header is one
    request); a read larger than a block goes straight to the source (in parallel chunks
    there). Sequential block reads double the read-ahead, up to 8 MiB. Remotely, when the
    jumps between blocks repeat a pattern (a walk skipping payloads of layers of one shape),
    the next blocks of the pattern are read ahead in parallel when requests are slow (see
    `_predict`).
    """

    def __init__(self, src: Source, *, block: int = 16 << 10, first: int = 64 << 10) -> None:
        super().__init__()
        self._src = src
        self._size = src.size
        self._pos = 0
        self._block = block
        self._first = first
        self._cache: dict[int, bytes] = {}  # block start -> bytes (a few blocks kept)
        self._last_end = -1
        self._ahead = block
        self._pending: list[tuple[int, int, Any]] = []  # big reads asked for ahead
        self._jumps: list[int] = []  # starts of the last blocks fetched after a jump
        #: start -> (length, future) of each block read ahead
        self._guesses: dict[int, tuple[int, Any]] = {}
        self._seen: set[int] = set()  # landings predicted so far (and not yet passed)
        self._skips: list[int] = []  # bytes skipped by the last jumps (a payload's size)
        self._read_end = -1  # where the last read ended (-1: nothing read yet)
        self._hot: tuple[int, bytes] = (0, b"")  # the block of the last read
        self._speculated = False  # whether the first jump's skip was guessed to repeat
        self._latency = getattr(src, "latency", 0.0)  # seconds the last block read took
        #: blocks the walk found already read ahead by `_predict` (a count, for benchmarks)
        self.guessed = 0
        #: blocks `_predict` asked for: at most 4 per guessed block + `_AHEAD_JUMPS` (or
        #: `_SPECULATE`, after a first jump guessed to repeat), so the guesses read for
        #: nothing stay below 3 per block that landed + that constant
        self.issued = 0
        #: reads ahead stop here (a lazy array sets the end of its bytes)
        self.limit = self._size
        self._big_end = -1  # where the last big read ended

    # -- file protocol
    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence == 1:
            offset += self._pos
        elif whence == 2:
            offset += self._size
        if offset < 0:
            raise OSError(f"{self._src.name}: negative seek position {offset}")
        self._pos = offset
        return offset

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = self._size - self._pos
        n = max(0, min(n, self._size - self._pos))
        data = self._range(self._pos, n)
        self._pos += len(data)
        return data

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    # -- buffer protocol (what the opcode walks use)
    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            start, stop, _ = index.indices(self._size)
            return self._range(start, max(0, stop - start))
        if index < 0:
            index += self._size
        if not 0 <= index < self._size:
            raise IndexError("index out of range")
        return self._range(index, 1)[0]

    def find(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        end = self._size if end is None else min(end, self._size)
        pos = start
        while pos < end:
            chunk = self._range(pos, min(self._block, end - pos) + len(sub) - 1)
            i = chunk.find(sub)
            if i >= 0 and pos + i + len(sub) <= end:
                return pos + i
            pos += self._block
        return -1

    # -- reads
    def _range(self, start: int, n: int) -> bytes:
        hot, data = self._hot  # the block the last read ended in: a walk's next few bytes
        if hot <= start and start + n <= hot + len(data) and n > 0:
            self._read_end = start + n
            return data[start - hot : start - hot + n]
        if n <= 0:
            return b""
        stop = min(start + n, self._size)
        out = []
        pos = start
        while pos < stop:
            blk = self._find_block(pos)
            if blk is None:
                if stop - pos > self._block:
                    out.append(self._big(pos, stop - pos))
                    pos = stop
                    break
                blk = self._fetch(pos)
            self._hot = blk
            bstart, data = blk
            piece = data[pos - bstart : stop - bstart]
            if not piece:
                break
            out.append(piece)
            pos += len(piece)
        self._read_end = pos
        return out[0] if len(out) == 1 else b"".join(out)

    def _big(self, start: int, n: int) -> bytes:
        """A large read; remotely, reads that continue it (up to 8 MiB ahead, the same size
        each) are already asked for in parallel, so a stream waits for one round trip, not
        one per chunk."""
        queue = self._pending
        if queue and queue[0][0] == start and queue[0][1] == n:
            data = queue.pop(0)[2].result()
        else:
            for _, _, fut in queue:
                fut.cancel()
            queue.clear()
            data = self._src.read(start, n)
        # read ahead for a stream: bytes whose end the reader set (a lazy array), or a big
        # read that continues the last one; not after one big read of unknown use (a header
        # past the first block: what follows it is payload nobody asked for)
        stream = self.limit < self._size or start == self._big_end
        self._big_end = start + n
        if self._src.remote and stream:
            depth = max(1, min(_AHEAD_JUMPS, _AHEAD_BYTES // max(n, 1)))
            nxt = queue[-1][0] + queue[-1][1] if queue else start + n
            while len(queue) < depth and nxt < self.limit:
                m = min(n, self.limit - nxt)
                queue.append((nxt, m, prefetcher().submit(self._src.read, nxt, m)))
                nxt += m
        return data

    def _find_block(self, pos: int) -> tuple[int, bytes] | None:
        for bstart, data in self._cache.items():
            if bstart <= pos < bstart + len(data):
                return bstart, data
        return None

    def _fetch(self, pos: int) -> tuple[int, bytes]:
        data = None
        guessed = self._guessed(pos) if self._guesses else None
        if guessed is not None:
            self.guessed += 1  # (before `_predict`: each guess that lands opens 4 more)
        if not self._cache and pos < self._first:
            start, n = 0, self._first
        elif pos == self._last_end:  # reading on: read further ahead each time
            start = pos
            self._ahead = n = min(self._ahead * 2, 8 << 20)
        else:  # a jump (a walk skipping a payload): maybe one the pattern predicted
            start, n, self._ahead = pos, self._block, self._block
            slow = getattr(self._src, "ahead_latency", _SLOW_REQUEST)  # a client's own
            if self._src.remote and self._latency >= slow:
                self._predict(pos)
        if guessed is not None:
            start, data = guessed
        if data is None:
            n = min(n, self._size - start)
            for g in self._guesses:  # bytes read ahead already are not asked for twice
                if start < g < start + n:
                    n = g - start
            t0 = time.perf_counter()
            data = self._src.read(start, n)
            # a block served from the source's first GET (read for the size) cost no request:
            # the source says what its last request took
            self._latency = max(time.perf_counter() - t0, getattr(self._src, "latency", 0.0))
        if len(self._cache) >= 8:
            self._cache.pop(next(iter(self._cache)))
        self._cache[start] = data
        self._last_end = start + len(data)
        return start, data

    def _guessed(self, pos: int) -> tuple[int, bytes] | None:
        """The block read ahead that holds `pos`, if one was."""
        for start, (n, fut) in self._guesses.items():
            if start <= pos < start + n:
                del self._guesses[start]
                return start, fut.result()
        return None

    def _predict(self, pos: int) -> None:
        """Read ahead, in parallel, the blocks where the next jumps land when the last jumps
        repeat a pattern (a pickle of layers of one shape: the walk skips the same payload
        sizes in the same order), so a walk waits for one request per period, not per jump.

        The pattern is recognised by the steps between landings (equal over two periods, or
        a run of steps within `_DRIFT` bytes of each other: their mean), or, sooner, by the
        bytes skipped: two equal skips (two payloads of one size) predict period 1 at the
        second jump, and the first jump's skip is guessed to repeat at once
        (`_SPECULATE_MIN`). What is asked for stays within `issued`'s budget.
        """
        jumps, skips = self._jumps, self._skips
        skip = pos - self._read_end if self._read_end >= 0 else -1
        jumps.append(pos)
        skips.append(skip)
        del jumps[: -2 * _PERIOD_MAX - 1]
        del skips[: -2 * _PERIOD_MAX - 1]
        steps = [b - a for a, b in itertools.pairwise(jumps)]
        for period in range(1, min(_PERIOD_MAX, len(steps) // 2) + 1):
            if steps[-period:] == steps[-2 * period : -period]:
                agree = period  # the steps that follow the pattern, the last ones
                while agree < len(steps) and steps[-agree - 1] == steps[-agree - 1 + period]:
                    agree += 1
                break
        else:
            run = _steady(steps)
            agree = 1
            if len(run) >= 2:  # steps a few bytes apart: their mean (records of keys growing,
                steps, period = [round(sum(run) / len(run))], 1  # a frame opcode now and then)
                agree = len(run)
            elif steps and skip > self._block and skips[-2] == skip:
                period = 1  # the same payload size skipped twice
            elif not steps and skip >= _SPECULATE_MIN and not self._speculated:
                self._speculated = True
                steps = [skip]  # the first payload's size, guessed to repeat
                period = agree = 1
            else:
                return
        if any(d <= 0 for d in steps[-period:]):
            return
        # further ahead as guesses land, and as far as the pattern held (a pattern seen over
        # a few steps of an irregular file is read ahead 8 blocks per step it held)
        first = _SPECULATE if self._speculated else _AHEAD_JUMPS  # (the budget's constant)
        depth = min(_AHEAD_WALK, max(first, 4 * self.guessed), first * agree)
        at = pos
        for k in range(depth):
            at += steps[-period + k % period]
            if at - _SLACK >= min(self.limit, self._size):
                break  # (a landing predicted just past the end may be the last one)
            if at in self._seen:  # predicted at the last jumps already (the usual case)
                continue
            span = self._free_span(at)
            if span is None:  # read ahead already (maybe by a guess a few bytes off)
                self._seen.add(at)
                continue
            if self.issued >= 4 * self.guessed + first:
                break  # guesses that do not land (an irregular file) stop costing requests
            self._seen.add(at)
            start, end = span
            self._guesses[start] = (
                end - start,
                guesser().submit(self._src.read, start, end - start),
            )
            self.issued += 1
        for start in [g for g, (n, _) in self._guesses.items() if g + n <= pos]:
            self._guesses.pop(start)[1].cancel()  # guesses the walk left behind (missed)
        while len(self._guesses) > 2 * _AHEAD_WALK:  # memory stays bounded
            self._guesses.pop(next(iter(self._guesses)))[1].cancel()
        if len(self._seen) > 4 * _AHEAD_WALK:
            self._seen = {p for p in self._seen if p > pos}

    def _free_span(self, at: int) -> tuple[int, int] | None:
        """The bytes to read ahead for a landing predicted at `at`: a block from `_SLACK`
        bytes before it (a landing a few bytes early is held too), cut where a block read or
        read ahead already holds bytes, so that no byte is asked for twice; None when one
        already holds `at` (a pickle's records between payloads grow by a byte or three when
        its keys or memo indices get longer: a guess made with the old step, or further
        ahead, a few hundred bytes off, still holds the new landing).

        Example:
            >>> import os, tempfile
            >>> p = os.path.join(tempfile.mkdtemp(), "x.bin")
            >>> with open(p, "wb") as fh:
            ...     _ = fh.write(bytes(100_000))
            >>> from treetool._source import source_for
            >>> r = BlockReader(source_for(p))
            >>> r._free_span(50_000), r._free_span(70_000)
            ((49488, 65872), (69488, 85872))
        """
        start, end = max(0, at - _SLACK), min(at - _SLACK + self._block, self._size)
        if at >= self._size:
            at = self._size - 1
        held = [(g, g + n) for g, (n, _) in self._guesses.items()]
        held += [(b, b + len(data)) for b, data in self._cache.items()]
        for a, b in held:
            if a <= at < b:
                return None
            if a < end and b > start:  # overlaps: keep the side that holds `at`
                if b <= at:
                    start = b
                else:
                    end = a
        return (start, end) if start < end else None

    def close(self) -> None:
        for _, fut in self._guesses.values():
            fut.cancel()
        self._guesses.clear()
        self._cache.clear()
        self._hot = (0, b"")
        for _, _, fut in self._pending:
            fut.cancel()
        self._pending.clear()
        super().close()
