"""A fault-injecting HTTP proxy in front of the S3 server (127.0.0.1 only).

Forwards every request unchanged (the Host header too, so SigV4 signatures
still verify) and, on ranged GETs, injects what object stores do under load:
  slowdown_every=N   every Nth ranged GET answers 503 SlowDown
  truncate_every=N   every Nth ranged GET sends half its body, then closes
  outage_at=N        at the Nth ranged GET the endpoint goes away (listening
                     socket closed, open connections cut) for outage_seconds,
                     then listens again on the same port: a server restart
"""
from __future__ import annotations

import http.client
import http.server
import socket
import threading
import time

SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
            b'<Message>Please reduce your request rate.</Message></Error>')


class FaultProxy:
    def __init__(self, upstream_port: int, slowdown_every: int = 0, truncate_every: int = 0,
                 outage_at: int = 0, outage_seconds: float = 2.0, on_request=None):
        self.upstream_port = upstream_port
        self.slowdown_every, self.truncate_every = slowdown_every, truncate_every
        self.outage_at, self.outage_seconds = outage_at, outage_seconds
        self.on_request = on_request  # on_request(method, path), before forwarding
        self.lock = threading.Lock()
        self.requests = self.ranged_gets = self.slowdowns = self.truncations = self.outages = 0
        self.bytes_sent = 0
        self.sockets: set = set()
        self.headers: list = []  # every request's headers (lower-case names)
        self.gets: list = []  # (path, Range header or None) of every GET
        self.server = None
        self.port = 0
        self.thread = None

    # ---- lifecycle -------------------------------------------------------------
    def start(self, port: int = 0) -> "FaultProxy":
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def setup(self):
                super().setup()
                with proxy.lock:
                    proxy.sockets.add(self.connection)

            def finish(self):
                with proxy.lock:
                    proxy.sockets.discard(self.connection)
                try:
                    super().finish()
                except OSError:
                    pass

            def do_GET(self): proxy.forward(self)
            def do_PUT(self): proxy.forward(self)
            def do_POST(self): proxy.forward(self)
            def do_DELETE(self): proxy.forward(self)
            def do_HEAD(self): proxy.forward(self)

        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        server.daemon_threads = True
        self.server = server
        self.port = server.server_address[1]
        self.thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.server is None:
            return
        self.server.shutdown()
        self.server.server_close()
        with self.lock:
            for s in list(self.sockets):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.server = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _outage(self) -> None:
        port = self.port
        self.stop()
        time.sleep(self.outage_seconds)
        for _ in range(100):  # the port may linger briefly; bounded
            try:
                self.start(port)
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("fault proxy could not listen again")

    # ---- forwarding ------------------------------------------------------------
    def forward(self, h: http.server.BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        ranged = h.command == "GET" and "Range" in h.headers
        fault = None
        with self.lock:
            self.headers.append({k.lower(): v for k, v in h.headers.items()})
            if h.command == "GET":
                self.gets.append((h.path, h.headers.get("Range")))
            self.requests += 1
            if ranged:
                self.ranged_gets += 1
                n = self.ranged_gets
                if self.outage_at and n == self.outage_at:
                    fault = "outage"
                    self.outages += 1
                elif self.slowdown_every and n % self.slowdown_every == 0:
                    fault = "slowdown"
                    self.slowdowns += 1
                elif self.truncate_every and n % self.truncate_every == 0:
                    fault = "truncate"
                    self.truncations += 1
        if self.on_request:
            self.on_request(h.command, h.path)
        if fault == "outage":
            threading.Thread(target=self._outage, daemon=True).start()
            h.close_connection = True
            return
        if fault == "slowdown":
            h.send_response(503)
            h.send_header("Content-Type", "application/xml")
            h.send_header("Content-Length", str(len(SLOWDOWN)))
            h.end_headers()
            h.wfile.write(SLOWDOWN)
            return
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=30)
        try:
            conn.putrequest(h.command, h.path, skip_host=True, skip_accept_encoding=True)
            for name, value in h.headers.items():
                conn.putheader(name, value)
            conn.endheaders(body if body else None)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        h.send_response(resp.status)
        for name, value in resp.getheaders():
            if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                h.send_header(name, value)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if fault == "truncate" and len(data) > 1:
            h.wfile.write(data[: len(data) // 2])
            h.wfile.flush()
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            with self.lock:
                self.bytes_sent += len(data) // 2
            return
        if h.command != "HEAD":
            h.wfile.write(data)
        with self.lock:
            self.bytes_sent += len(data)
