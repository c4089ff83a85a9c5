"""`https://` through treetool's own HTTP/1.1 client, against a real TLS server on 127.0.0.1
whose certificate this test makes: trusted (by `SSL_CERT_FILE`, which the system's default
verify paths read), the file is listed over ranged reads on kept-alive connections;
untrusted, or issued for another host, it is one line and no request reaches the server."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from typing import Any

import numpy as np
import pytest
from cli_runner import treetool
from safetensors.numpy import save_file
from storage_servers import HttpServer


def _certificate(folder: Any, names: list[str], ips: list[str]) -> tuple[str, str]:
    """A self-signed certificate for `names` and `ips` and its key: (cert.pem, key.pem)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "treetool test")])
    now = datetime.datetime.now(datetime.UTC)
    alt = [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = str(folder / "cert.pem"), str(folder / "key.pem")
    with open(cert_path, "wb") as fh:
        fh.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as fh:
        fh.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return cert_path, key_path


def _tls_server(root: str, cert: str, key: str) -> HttpServer:
    """The tests' ranged HTTP server, its listening socket wrapped in TLS."""
    server = HttpServer(root)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    inner = server._server
    inner.socket = ctx.wrap_socket(inner.socket, server_side=True)
    accepted: list[Any] = []  # the address of each connection accepted
    accept = inner.get_request

    def counted() -> Any:
        request = accept()
        accepted.append(request[1])
        return request

    inner.get_request = counted
    server.accepted = accepted  # type: ignore[attr-defined]
    return server


@pytest.fixture(scope="module")
def served(tmp_path_factory: Any) -> Any:
    """(url of a small safetensors file over TLS for 127.0.0.1, the trusted cert's path,
    the server, the path of a certificate for another host)."""
    root = tmp_path_factory.mktemp("https")
    save_file(
        {"layer.w": np.arange(12, dtype=np.float32).reshape(3, 4), "layer.b": np.zeros(4)},
        str(root / "m.safetensors"),
    )
    (root / "big.bin").write_bytes(bytes(i % 256 for i in range(200_000)))
    certs = tmp_path_factory.mktemp("certs")
    cert, key = _certificate(certs, ["localhost"], ["127.0.0.1"])
    other = tmp_path_factory.mktemp("other")
    other_cert, _ = _certificate(other, ["example.invalid"], [])
    server = _tls_server(str(root), cert, key)
    yield f"https://127.0.0.1:{server.port}/m.safetensors", cert, server, other_cert
    server.stop()


def test_https_file_is_listed_over_tls(served: Any) -> None:
    url, cert, server, _other = served
    server.log.clear()
    run = treetool("ls", url, env={"SSL_CERT_FILE": cert})
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["['layer.b']\t[4]\tfloat64", "['layer.w']\t[3, 4]\tfloat32"]
    assert [r.range for r in server.log.requests] == ["bytes=0-65535"]  # the whole small file


def test_https_with_an_untrusted_certificate_is_one_line(served: Any) -> None:
    url, _cert, server, other = served
    server.log.clear()
    run = treetool("ls", url, env={"SSL_CERT_FILE": other})  # a certificate for another host
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.startswith(f"treetool: error: {url}: [SSL: CERTIFICATE_VERIFY_FAILED]")
    assert run.stderr.count("\n") == 1
    assert server.log.requests == []  # no request was sent over the untrusted connection


def test_https_reads_reuse_one_tls_connection(served: Any, monkeypatch: Any) -> None:
    """In one process, a read after the first goes over the kept-alive TLS connection."""
    url, cert, server, _other = served
    import treetool.io._sources._wire as wire
    from treetool._source import session, source_for

    monkeypatch.setenv("SSL_CERT_FILE", cert)
    monkeypatch.setattr(wire, "_tls", None)  # (made again, with this test's trust)
    big = url.replace("m.safetensors", "big.bin")
    server.log.clear()
    before = len(server.accepted)
    with session():
        src = source_for(big)
        assert src.size == 200_000
        assert src.read(150_000, 6) == bytes(range(150_000 % 256, 150_000 % 256 + 6))
    assert [r.range for r in server.log.requests] == ["bytes=0-65535", "bytes=150000-150005"]
    assert len(server.accepted) - before == 1  # one TLS connection for both requests
