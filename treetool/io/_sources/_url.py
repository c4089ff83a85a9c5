"""`http(s)://` URLs parsed once, strictly (RFC 3986 authority, UTS-46 IDNA, valid ports).

`urllib.parse.urlsplit` is lenient where a lenient parser is a hazard: it raises a bare
`ValueError` for a port out of range, only when `.port` is read; it takes a backslash as part
of the host name (a browser reads `http://a.example\\@b.example/` as host `a.example`); its
IDNA codec is IDNA 2003, which maps `faß.example` to `fass.example` (another domain than the
one browsers and curl reach: UTS-46 nontransitional keeps the `ß`). `parse` reads a URL once
into a `Url` whose host is what goes on the wire, or refuses it with one `LoadError` line that
names the URL (shown redacted, as every URL: `treetool._text.redact_urls`), never the part
that failed (the "port" of `http://me:pa/ss@host/` is part of a password).

The authority is what RFC 3986 section 3.2 allows and nothing more: user info of unreserved,
percent-encoded, sub-delimiter and `:` characters (non-ASCII letters too, as IRIs allow);
one `@`; a host that is a bracketed IPv6 address, a dotted IPv4 address, or a domain name of
letters, digits, `-`, `.` and `_` (non-ASCII ones by IDNA); a port of 1 to 65535. A host
that ends in a number must be a dotted IPv4 address (`0x7f.1` and `2130706433`, which
resolvers read as 127.0.0.1, are refused).

Example:
    >>> u = parse("https://me:pw@Bücher.example:8443/a/m.safetensors?x=1#f")
    >>> u.scheme, u.host, u.port, u.target, u.origin
    ('https', 'xn--bcher-kva.example', 8443, '/a/m.safetensors?x=1', ('https', 'xn--bcher-kva.example', 8443))
    >>> parse("https://faß.example/m").host
    'xn--fa-hia.example'
    >>> parse("http://h:99999/m")
    Traceback (most recent call last):
    ...
    treetool.LoadError: http://h:99999/m: the URL's port is not a number from 1 to 65535
"""

from __future__ import annotations

from typing import NamedTuple

from treetool._errors import LoadError

__all__ = ["Url", "parse"]

_ALPHA_DIGIT = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_UNRESERVED = frozenset(_ALPHA_DIGIT + "-._~")
_SUB_DELIMS = frozenset("!$&'()*+,;=")
_HEX = frozenset("0123456789abcdefABCDEF")
#: the ASCII characters of user info besides `%XX` (RFC 3986 3.2.1)
_USERINFO = _UNRESERVED | _SUB_DELIMS | {":"}
#: the ASCII characters of a host name as it goes on the wire (`_` included: local names)
_HOST = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-._")


class Url(NamedTuple):
    """A parsed `http(s)://` URL: `host` as it goes on the wire (lower case, IDNA-encoded,
    an IPv6 address without brackets), `port` defaulted by the scheme, `authority` the text
    between `//` and the path as written (user info included), `path` and `query` as
    written (`query` without its `?`; a fragment is dropped)."""

    scheme: str
    userinfo: str | None
    host: str
    port: int
    authority: str
    path: str
    query: str

    @property
    def origin(self) -> tuple[str, str, int]:
        """(scheme, host, port): where credentials may go, and redirects stay."""
        return self.scheme, self.host, self.port

    @property
    def target(self) -> str:
        """The request target as written: path (or `/`) and query."""
        return (self.path or "/") + (f"?{self.query}" if self.query else "")


def _pct_ok(text: str, i: int) -> bool:
    return i + 2 < len(text) and text[i + 1] in _HEX and text[i + 2] in _HEX


def _userinfo_ok(text: str) -> bool:
    """Whether `text` is RFC 3986 user info (non-ASCII letters allowed, as in an IRI)."""
    for i, c in enumerate(text):
        if c == "%":
            if not _pct_ok(text, i):
                return False
        elif c.isascii():
            if c not in _USERINFO:
                return False
        elif not c.isprintable():
            return False
    return True


def _host(text: str, url: str) -> str:
    """The host of `url`'s authority as it goes on the wire, or one line naming `url`."""
    bad = LoadError(f"{url}: the URL's host name is not a valid domain name or address")
    if text.startswith("["):
        import ipaddress

        if not text.endswith("]") or "%" in text:  # (a zone id names this machine's link)
            raise bad
        try:
            return str(ipaddress.IPv6Address(text[1:-1]))
        except ValueError:  # (a zone id, IPvFuture, not an address)
            raise bad from None
    if not text:
        raise bad
    if not text.isascii():
        if not text.isprintable():
            raise bad
        import idna  # UTS-46 nontransitional, as browsers and curl map names

        try:
            text = idna.encode(text, uts46=True, transitional=False).decode("ascii")
        except (UnicodeError, ValueError):  # (idna.IDNAError is both)
            raise bad from None
    host = text.lower()
    if not _HOST.issuperset(host) or ".." in host or host.startswith("."):
        raise bad
    last = host.rstrip(".").rpartition(".")[2]
    hexa = last[:2] == "0x" and _HEX.issuperset(last[2:])
    if last.isdigit() or hexa:  # ends in a number (WHATWG): an IPv4 address
        import ipaddress

        try:
            ipaddress.IPv4Address(host.rstrip("."))
        except ValueError:
            raise bad from None
        host = host.rstrip(".")
    return host


def parse(url: str) -> Url:
    """`url` (an `http://` or `https://` URL) parsed strictly, or one `LoadError` line
    naming it (module docstring).

    Example:
        >>> parse("http://[::1]:8000/").host, parse("http://h.example:/").port
        ('::1', 80)
        >>> parse("http://a.example\\\\@b.example/m")
        Traceback (most recent call last):
        ...
        treetool.LoadError: http://***@b.example/m: the URL's authority (user info, host and port) is not valid (RFC 3986)
    """
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in ("http", "https"):
        raise LoadError(f"{url}: not an http(s):// URL")
    end = len(rest)
    for c in "/?#":
        i = rest.find(c)
        if i != -1:
            end = min(end, i)
    authority, tail = rest[:end], rest[end:]
    bad = LoadError(
        f"{url}: the URL's authority (user info, host and port) is not valid (RFC 3986)"
    )
    userinfo: str | None = None
    hostport = authority
    if "@" in authority:
        userinfo, _, hostport = authority.rpartition("@")
        if not _userinfo_ok(userinfo):  # (a second `@`, a backslash, a space...)
            raise bad
    if hostport.startswith("["):
        close = hostport.find("]")
        host_text, port_text = hostport[: close + 1], hostport[close + 1 :]
        if close == -1 or (port_text and not port_text.startswith(":")):
            raise bad
        port_text = port_text[1:]
        has_port = bool(hostport[close + 1 :])
    else:
        host_text, colon, port_text = hostport.partition(":")
        has_port = bool(colon)
    host = _host(host_text, url)
    default = 443 if scheme == "https" else 80
    if has_port and port_text:
        if not (port_text.isascii() and port_text.isdigit() and len(port_text) <= 5):
            raise LoadError(f"{url}: the URL's port is not a number from 1 to 65535")
        port = int(port_text)
        if not 0 < port <= 65535:
            raise LoadError(f"{url}: the URL's port is not a number from 1 to 65535")
    else:
        port = default
    path, _, query = tail.partition("#")[0].partition("?")
    return Url(scheme, userinfo, host, port, authority, path, query)
