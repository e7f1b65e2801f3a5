"""The operator's own HTTP server (uvicorn with httptools, on uvloop) meets
bytes that are not HTTP: each connection gets a 400 and is closed, and the
process goes on serving everyone else."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

from tests.support.operators import start_operator

MALFORMED = {
    "a length that is not a number": b"GET /readyz HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    "no request line at all": b"\x00\x01not http\r\n\r\n",
    "a chunk size that is not hex": (
        b"POST /v1/ns/default/executions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
    ),
    "a header without a colon": b"GET /readyz HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",
    "two lengths that disagree": (
        b"POST /v1/ns/default/executions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\n{}"
    ),
}


def _answer(port: int, raw: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(raw)
        received = b""
        while chunk := connection.recv(4096):  # the server closes a connection it cannot parse
            received += chunk
    return received


def test_bytes_that_are_not_http_get_a_400_and_the_operator_serves_on(database_url: str, tmp_path: Path) -> None:
    operator = start_operator("operator", database_url, tmp_path)
    try:
        for case, raw in MALFORMED.items():
            answer = _answer(operator.port, raw)
            assert answer.startswith(b"HTTP/1.1 400 "), (case, answer[:200])
            with urllib.request.urlopen(f"{operator.api_url}/readyz", timeout=10) as response:
                assert response.status == 200, case
        assert operator.alive(), operator.logs()
    finally:
        operator.stop()
