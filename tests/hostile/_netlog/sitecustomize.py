"""Loaded by the hostile tests' child processes (on their PYTHONPATH): every TCP connection a
Python socket makes is appended, as `host:port`, to the file `$TREETOOL_TEST_CONNECT_LOG`,
then made as usual. The tests assert that treetool connected nowhere but where the command
line pointed it (connections made by a native client, obstore's, are counted by the servers).
"""

import os
import socket

_LOG = os.environ.get("TREETOOL_TEST_CONNECT_LOG")

if _LOG:
    _connect = socket.socket.connect
    _connect_ex = socket.socket.connect_ex

    def _note(address: object) -> None:
        if isinstance(address, tuple) and len(address) >= 2:
            with open(_LOG, "a") as fh:
                fh.write(f"{address[0]}:{address[1]}\n")

    def connect(self: socket.socket, address: object) -> None:
        _note(address)
        return _connect(self, address)

    def connect_ex(self: socket.socket, address: object) -> int:
        _note(address)
        return _connect_ex(self, address)

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
