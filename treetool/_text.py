"""The one sanitiser for text that came from a file (or any object) on its way to a terminal.

Names, keys, class paths, reprs and error messages built from a file are hostile: an escape
sequence in a class name can clear the screen, set the window title, plant an OSC 8 link or
(OSC 52) write the clipboard; a newline forges an `ls` line; a bidi override reorders what is
shown. `safe()` shows every such character as a visible escape (`\\x1b`, `\\n`, `\\u202e`),
the way `repr` would, and leaves all other text (printable ASCII, accented letters, CJK,
emoji, spaces) as it is. Renderers call it on every file-derived string; they never parse
such text as rich or Textual markup (`safe_text` builds a plain rich `Text`).

This module sits below the renderers and imports nothing heavy: the CLI's error lines and
`treetool --help` use it without rich.
"""

from __future__ import annotations

import sys
import unicodedata
from typing import Any

__all__ = ["all_printable", "redact_urls", "safe", "safe_text"]

#: the printable ASCII bytes (space to tilde)
_PRINTABLE_ASCII = bytes(range(0x20, 0x7F))

#: a URL in running text: its scheme, user info (`user:password@`), the rest of its authority
#: and path, its query (`?a=1&b=2`) and fragment. User info is what precedes the last `@`
#: of the authority, or, after a `user:`, of the text up to the query: a password may hold a
#: `/` (`http://me:pa/ss@host/`, which RFC 3986 reads as host `me`, port `pa`: refused), and
#: all of it is hidden (at the price of hiding a host in `http://host:80/a@b`). A query
#: value stops at `&`, `#`, a space, a
#: quote or a colon that ends the text or is followed by a space (the `: ` after a URL in an
#: error line). Compiled on first use (`re` is not imported until a URL is shown).
_URL_PATTERN = (
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)"
    r"(?P<user>[^/?#\s'\"<>]*@|[^/?#\s'\"<>@]*:[^?#\s'\"<>]*@)?"
    r"(?P<path>[^?#\s'\"<>]*)(?P<query>\?(?:[^#\s'\"<>:]|:(?![\s'\"]|$))*)?"
    r"(?P<fragment>#(?:[^\s'\"<>:]|:(?![\s'\"]|$))*)?"
)
_URL: Any = None


def _redacted(m: Any) -> str:
    out = m.group("scheme") + ("***@" if m.group("user") else "") + m.group("path")
    query = m.group("query")
    if query:
        parts = []
        for part in query[1:].split("&"):
            key, eq, _ = part.partition("=")
            parts.append(f"{key}=***" if eq else ("***" if part else ""))
        out += "?" + "&".join(parts)
    if m.group("fragment"):
        out += "#***"
    return out


def redact_urls(text: str) -> str:
    """`text` with the secrets of every URL in it hidden: user info (`user:password@`) becomes
    `***@`, every query value `***` and a fragment `#***` (a presigned URL's signature, a `?token=`). The one
    place where treetool hides credentials: `safe` calls it, so every error line, listing,
    rendered name and JSON document shows URLs this way.

    Example:
        >>> redact_urls("http://me:Pa55@host:8000/m.safetensors?token=T0k&v=2: not found")
        'http://***@host:8000/m.safetensors?token=***&v=***: not found'
        >>> redact_urls("s3://bucket/key and plain text")
        's3://bucket/key and plain text'
        >>> redact_urls("http://me:pa/ss@host/m.bin: bad"), redact_urls("hf://org/repo@main/m")
        ('http://***@host/m.bin: bad', 'hf://org/repo@main/m')
    """
    global _URL
    if "://" not in text:
        return text
    if _URL is None:
        import re

        _URL = re.compile(_URL_PATTERN)
    return _URL.sub(_redacted, text)


_SHORT = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}


def _escape(code: int) -> str:
    if code in _SHORT:
        return _SHORT[code]
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


class _Escapes(dict):
    """`str.translate` table, filled on first sight of each code point."""

    def __missing__(self, code: int) -> str:
        c = chr(code)
        # printable, or a space that is not a line/paragraph separator (NBSP, ideographic
        # space...): shown as is. Everything else (C0, DEL, C1, bidi and other format
        # characters, lone surrogates, line separators, private use, unassigned) is escaped.
        keep = c.isprintable() or unicodedata.category(c) == "Zs"
        out = c if keep else _escape(code)
        if len(self) < 4096:  # a hostile file must not grow the table without bound
            self[code] = out
        return out


_TABLE = _Escapes()


def safe(text: str, *, newlines: bool = False) -> str:
    """`text` with control, escape, bidi and other invisible format characters escaped.

    C0 controls (newline and tab included), DEL, C1 controls, bidi controls (U+202A-202E,
    U+2066-2069, U+200E/F, U+061C), the other format characters (zero-width joiners, BOM),
    line/paragraph separators and lone surrogates come out as `\\x1b`, `\\n`, `\\u202e`,
    `\\ud800`. Printable text, including non-ASCII letters and spaces, is unchanged. Cheap on
    the common case: printable text is returned as is after one C-level scan.

    `newlines=True` keeps `\\n` as a line break: for multi-line text whose line breaks are
    the caller's own (an error message that puts a path on its own line).

    Example:
        >>> safe("layers.0.weight")
        'layers.0.weight'
        >>> safe("evil\\x1b]0;title\\x07\\nname")
        'evil\\\\x1b]0;title\\\\x07\\\\nname'
        >>> safe("abc\\u202edef"), safe("poids_été")
        ('abc\\\\u202edef', 'poids_été')
    """
    if "://" in text:
        text = redact_urls(text)
    if text.isprintable():
        return text
    if newlines:
        return "\n".join(line.translate(_TABLE) for line in text.split("\n"))
    return text.translate(_TABLE)


def all_printable(texts: list[str]) -> bool:
    """Whether every one of `texts` is printable (`str.isprintable`), so that none needs
    `safe`: one check for a whole chunk of `ls` lines instead of one per path. ASCII text
    (the common case) is checked as bytes: in two vectorised numpy passes (~4 ns a path) when
    the read has imported numpy, else by one `bytes.translate` (~35 ns a path, where
    importing numpy would cost ~25 ms); a scan of each path costs 100-300 ns. Other text by
    one scan of it all.

    Example:
        >>> all_printable(["a.b", "['w']"]), all_printable(["a", "b\\x1b[2J"]), all_printable(["été"])
        (True, False, True)
    """
    if len(texts) < 64:
        return all(t.isprintable() for t in texts)
    blob = "".join(texts)
    if not blob.isascii():
        return blob.isprintable()  # printable as a whole exactly when each part is
    raw = blob.encode("ascii")
    np = sys.modules.get("numpy")
    if np is None:  # not imported by the read (a remote listing): not worth ~25 ms here
        return not raw.translate(None, _PRINTABLE_ASCII)
    codes = np.frombuffer(raw, np.uint8)
    return not codes.size or (int(codes.min()) >= 0x20 and int(codes.max()) < 0x7F)


def safe_text(text: Any, style: str = "") -> Any:
    """A rich `Text` of `safe(str(text))`: never parsed as markup, no control characters.

    Example:
        >>> safe_text("[bold]x[/]\\x1b[2J").plain
        '[bold]x[/]\\\\x1b[2J'
    """
    from rich.text import Text

    return Text(safe(text if isinstance(text, str) else str(text)), style=style)
