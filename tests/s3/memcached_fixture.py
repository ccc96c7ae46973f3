"""A memcached on 127.0.0.1 for the peer-cache tests (tests/s3 and tests/python):
started on a free port with -M (refuse rather than evict, as spec/format.md §8.6
asks of nodes), stopped by its PID."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time


@contextlib.contextmanager
def memcached(megabytes: int = 16):
    """Yields ("127.0.0.1:<port>", the server's Popen)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    args = ["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-M", "-m", str(megabytes), "-t", "1"]
    if os.geteuid() == 0:
        args += ["-u", "root"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):  # bounded: about 5 s
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.025)
        yield f"127.0.0.1:{port}", proc
    finally:
        proc.kill()
        proc.wait(timeout=10)
