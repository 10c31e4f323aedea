"""A TCP proxy to the test database that can turn into a black hole (a half-open network).

``blackhole()`` makes every connection open at that moment silent for good: its sockets stay
open, nothing is forwarded and nothing is read, so the database client sees neither an error nor
a reply (what a failover, a dead NAT entry or a pulled cable looks like to it). Connections made
while black-holed are accepted and are just as silent. ``restore()`` brings the network back for
new connections only: the silenced ones never come back, as after a failover.

Everything runs in daemon threads of the test process and listens on 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass, field


@dataclass(eq=False)
class _Pair:
    client: socket.socket
    upstream: socket.socket | None
    silent: threading.Event = field(default_factory=threading.Event)


class BlackholeProxy:
    """``127.0.0.1:<port>`` forwarding to ``target`` until :meth:`blackhole` is called."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._pairs: list[_Pair] = []
        self._lock = threading.Lock()
        self._holed = False
        self.accepted = 0  # connections accepted so far (forwarded or silent)
        threading.Thread(target=self._accept, daemon=True, name="proxy-accept").start()

    def blackhole(self) -> None:
        with self._lock:
            self._holed = True
            for pair in self._pairs:
                pair.silent.set()

    def restore(self) -> None:
        with self._lock:
            self._holed = False

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for sock in (pair.client, pair.upstream):
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.accepted += 1
                holed = self._holed
            if holed:  # accepted, then never answered: a connect attempt into the void
                pair = _Pair(client, None)
                pair.silent.set()
                with self._lock:
                    self._pairs.append(pair)
                continue
            try:
                upstream = socket.create_connection(self._target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            pair = _Pair(client, upstream)
            with self._lock:
                self._pairs.append(pair)
                if self._holed:
                    pair.silent.set()
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(
                    target=self._pipe, args=(pair, src, dst), daemon=True, name="proxy-pipe"
                ).start()

    @staticmethod
    def _pipe(pair: _Pair, src: socket.socket, dst: socket.socket) -> None:
        # Poll with a short timeout so that a pair turning silent stops reading at once.
        src.settimeout(0.05)
        try:
            while not pair.silent.is_set():
                try:
                    data = src.recv(65536)
                except TimeoutError:
                    continue
                if not data or pair.silent.is_set():
                    break  # data arriving as the hole opens is swallowed, never forwarded
                dst.sendall(data)
        except OSError:
            pass
        if pair.silent.is_set():
            return  # keep both sockets open and unread: the peer sees silence, not an error
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
