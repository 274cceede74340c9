"""The API server's response compression (k8s.io/apiserver/pkg/endpoints/handlers/
responsewriters/writers.go, the APIResponseCompression feature, on by default): an answer
of 128 KiB or more to a client whose Accept-Encoding names gzip goes out gzip-compressed
at level 1 (defaultGzipContentEncodingLevel), chunked, with Content-Encoding: gzip.

Off unless KubeAPIServer.gzip_responses is set: it costs the test server CPU that most
tests do not want, and benchmarks turn it on to measure what a client pays to inflate."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable

THRESHOLD = 128 * 1024  # defaultGzipThresholdBytes
LEVEL = 1  # defaultGzipContentEncodingLevel (BestSpeed)


def wanted(accept_encoding: str | None, length: int) -> bool:
    encodings = {e.split(";")[0].strip().lower() for e in (accept_encoding or "").split(",")}
    return length >= THRESHOLD and "gzip" in encodings


def send(h, code: int, content_type: str, headers: dict, pieces: Iterable[bytes],
         count: Callable[[int], None]) -> None:
    """Writes the answer gzip-compressed in HTTP/1.1 chunks, each counted (`count`, the
    compressed bytes) before it is written: a client that has read the whole answer then
    finds it counted."""
    h.send_response(code)
    h.send_header("Content-Type", content_type)
    h.send_header("Content-Encoding", "gzip")
    h.send_header("Transfer-Encoding", "chunked")
    for k, v in headers.items():
        h.send_header(k, v)
    h.end_headers()
    gz = zlib.compressobj(LEVEL, zlib.DEFLATED, 31)  # 31: a gzip header and trailer
    for out in (*(gz.compress(piece) for piece in pieces), gz.flush()):
        if out:
            count(len(out))
            h.wfile.write(b"%x\r\n%s\r\n" % (len(out), out))
    h.wfile.write(b"0\r\n\r\n")
