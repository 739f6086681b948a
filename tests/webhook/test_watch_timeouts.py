"""A watch whose response never starts is given up on soon; one that started waits the stream's
read timeout between events.

The real API server cannot be made to leave a watch request hanging (it happens to a connection
cut half-way through a load balancer, as the soak's watch cuts did), so a raw socket stands in: it
reads the request, then answers as each test says.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from kubernetes import client

from webhook import kube
from webhook.kube import ApiResource, KubeError, KubeReader

PODS = ApiResource("v1", "pods", "Pod")
EVENT = b'{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"7"}}}\n'


@contextmanager
def answering(answer: Callable[[socket.socket], None]) -> Iterator[KubeReader]:
    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            answer(conn)
            done.wait(10)

    threading.Thread(target=serve, daemon=True).start()
    configuration = client.Configuration(host=f"http://127.0.0.1:{listener.getsockname()[1]}")
    try:
        yield KubeReader(client.ApiClient(configuration))
    finally:
        done.set()
        listener.close()


def test_a_watch_whose_response_never_starts_fails_within_the_start_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kube, "WATCH_START_TIMEOUT", 0.3)
    with answering(lambda conn: None) as reader:
        started = time.monotonic()
        with pytest.raises(KubeError, match="cannot reach the API server"):
            reader.watch(PODS, "1", 60, read_timeout=30.0)
    assert time.monotonic() - started < 5  # not the 30 s read timeout


def slow_event(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    time.sleep(0.8)
    conn.sendall(b"%x\r\n%s\r\n" % (len(EVENT), EVENT))


def test_a_started_watch_waits_the_read_timeout_between_events(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kube, "WATCH_START_TIMEOUT", 0.3)
    with answering(slow_event) as reader:
        stream = reader.watch(PODS, "1", 60, read_timeout=30.0)
        try:
            event = next(iter(stream))
        finally:
            stream.close()
    assert event["type"] == "BOOKMARK" and event["object"]["metadata"]["resourceVersion"] == "7"
