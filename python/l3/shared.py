"""One input pipeline for several jobs on one machine (CoorDL's coordinated prep).

Several training jobs over the same dataset (a hyper-parameter search) each running
their own loader decode every image once per job. Here one `Producer` process runs the
loader once (read, decode, crop, flip, normalise) and every `Consumer` process receives
every batch, in the same order, without a copy:

    # the producer (one process)
    l3.shared.Producer("data/", name="hp", consumers=3, batch_size=64, seed=0).run(epochs=10)

    # each of the 3 jobs (other processes, started in any order)
    with l3.shared.Consumer("hp") as batches:
        for epoch in range(10):
            for batch in batches:          # one epoch; l3.Batch, data read-only
                x = torch.as_tensor(batch.data)

Ownership protocol (how memory is shared and given back):
- The producer owns a ring of `slots` batch buffers in one anonymous shared-memory file
  (memfd_create: it has no name, so nothing is ever left in /dev/shm, even when a
  process is killed; the memory is freed when the last process mapping it exits).
- A consumer joins by connecting to the producer's Unix socket (the abstract name
  "l3.shared.<uid>.<name>", which also vanishes with the process; both sides check the
  peer's uid) and receives the memfd over the socket (SCM_RIGHTS); it maps it read-only.
- For each batch the producer writes slot seq % slots, then sends (seq, slot, rows, ...)
  to every live consumer; the slot is now held by each of them. A consumer returns it
  (sends ack seq) when it asks for its next batch (or calls release()): a batch is valid
  until the next one is requested, as with Loader(copy=False).
- The producer writes a slot again only when every live consumer has returned it:
  back-pressure from the slowest consumer, which may be at most `slots` batches behind.
- A consumer that exits or is killed closes its socket; the producer sees the end of
  the stream at once and drops it from every slot it held, so the others never wait on
  it. `ack_timeout` (seconds, default off) also drops a consumer that is alive but does
  not return a slot in time (stopped, deadlocked).
- When the producer exits or is killed, consumers get ConnectionError at their next batch
  (after the batches already sent to them, whose memory stays mapped).

All consumers must have joined before the first batch (`consumers=N`, `join_timeout`);
later connections are refused. Linux only (memfd, abstract sockets, SCM_RIGHTS).
Measurements (decode work and images/s against one loader per job): bench/shared_pipeline.py.
"""
from __future__ import annotations

import json
import mmap
import os
import select
import socket
import struct
import time
from typing import Any, Iterable, Optional

import numpy as np

from . import Batch, Loader

__all__ = ["Producer", "Consumer"]

# One message per SOCK_SEQPACKET datagram: kind, slot, seq, rows, epoch, index.
_MSG = struct.Struct("<IIQQQQ")
_BATCH, _EPOCH_END, _DONE, _ACK = 1, 2, 3, 4
_ALIGN = 4096


def _address(name: str) -> str:
    if not name or "\0" in name or "/" in name or len(name) > 80:
        raise ValueError(f"name must be 1..80 characters without '/' or NUL; got {name!r}")
    return f"\0l3.shared.{os.getuid()}.{name}"  # abstract namespace: no file, gone with the process


def _peer_uid(sock: socket.socket) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[2]


def _round_up(n: int, to: int) -> int:
    return (n + to - 1) // to * to


class _Layout:
    """Where a batch lives in its slot: data, then labels (int64), then records (uint64)."""

    def __init__(self, row_shape, dtype, rows: int):
        self.row_shape = tuple(int(v) for v in row_shape)
        self.dtype = np.dtype(dtype)
        self.rows = int(rows)
        data_bytes = self.rows * int(np.prod(self.row_shape, dtype=np.int64)) * self.dtype.itemsize
        self.labels_at = _round_up(data_bytes, 64)
        self.records_at = self.labels_at + _round_up(8 * self.rows, 64)
        self.slot_bytes = _round_up(self.records_at + 8 * self.rows, _ALIGN)

    def to_json(self, slots: int) -> bytes:
        return json.dumps({"row_shape": self.row_shape, "dtype": self.dtype.str, "rows": self.rows,
                           "slots": slots}).encode()

    @classmethod
    def from_json(cls, text: bytes):
        d = json.loads(text)
        return cls(d["row_shape"], d["dtype"], d["rows"]), int(d["slots"])

    def views(self, buffer, slot: int, rows: int):
        base = slot * self.slot_bytes
        data = np.ndarray((rows,) + self.row_shape, self.dtype, buffer=buffer, offset=base)
        labels = np.ndarray((rows,), np.int64, buffer=buffer, offset=base + self.labels_at)
        records = np.ndarray((rows,), np.uint64, buffer=buffer, offset=base + self.records_at)
        return data, labels, records


class _Peer:
    __slots__ = ("sock", "pid", "held")

    def __init__(self, sock: socket.socket, pid: int):
        self.sock = sock
        self.pid = pid
        self.held: set = set()  # seqs sent and not yet acknowledged


class Producer:
    """Runs one l3.Loader (`path` and Loader keyword arguments) and hands every batch to
    `consumers` Consumer processes joined under `name` (see the module's docstring).

    `source` instead of `path`: any iterable of l3.Batch-like objects (`.data`,
    `.labels`, optionally `.records`, `.epoch`, `.index`) or (data, labels) pairs; one
    pass is one epoch. The name is taken when the Producer is made (ValueError if
    another live producer has it), so consumers may connect from then on."""

    def __init__(self, path: Any = None, *, name: str, consumers: int, slots: int = 4,
                 join_timeout: float = 60.0, ack_timeout: Optional[float] = None, linger: float = 60.0,
                 source: Optional[Iterable] = None, **loader_options):
        if (path is None) == (source is None):
            raise ValueError("give a dataset path (and Loader options) or a source, not both")
        if int(consumers) < 1 or int(slots) < 1:
            raise ValueError("consumers and slots must be >= 1")
        self.name = name
        self.consumers = int(consumers)
        self.slots = int(slots)
        self.join_timeout = float(join_timeout)
        self.ack_timeout = None if ack_timeout is None else float(ack_timeout)
        self.linger = float(linger)
        if source is None:
            if str(loader_options.get("device", "cpu")) != "cpu":
                raise ValueError("l3.shared shares host batches: use device='cpu' in the producer (each job moves "
                                 "its batches to its GPU)")
            loader_options["copy"] = False  # the batch is copied once, into the shared slot
            source = Loader(path, **loader_options)
        self._source = source
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        try:
            self._listener.bind(_address(name))
        except OSError as e:
            self._listener.close()
            raise ValueError(f"l3.shared: the name {name!r} is taken by a running producer ({e.strerror})") from None
        self._listener.listen(self.consumers)
        self._peers: list = []
        self._memfd = -1
        self._buffer: Optional[mmap.mmap] = None
        self._layout: Optional[_Layout] = None
        self._seq = 0
        self._finished = False
        self._stats = dict(batches=0, images=0, loader_wait_seconds=0.0, backpressure_seconds=0.0,
                           copy_seconds=0.0, dropped_consumers=0, max_lead=0)

    # ---- joining ----
    def _accept_all(self) -> None:
        deadline = time.monotonic() + self.join_timeout
        while len(self._peers) < self.consumers:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._listener], [], [], left)[0]:
                raise TimeoutError(f"l3.shared: {len(self._peers)} of {self.consumers} consumers joined "
                                   f"{self.name!r} within {self.join_timeout:g} s")
            sock, _ = self._listener.accept()
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            pid, uid, _gid = struct.unpack("3i", creds)
            if uid != os.getuid():  # the abstract namespace has no permissions: check who it is
                sock.close()
                continue
            self._peers.append(_Peer(sock, pid))
        self._listener.close()  # late joiners are refused: they would miss batches

    def _open_ring(self, first) -> None:
        data = np.asarray(first[0])
        self._layout = _Layout(data.shape[1:], data.dtype, data.shape[0])
        size = self._layout.slot_bytes * self.slots
        self._memfd = os.memfd_create(f"l3.shared.{self.name}", os.MFD_CLOEXEC)
        os.ftruncate(self._memfd, size)
        self._buffer = mmap.mmap(self._memfd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        hello = self._layout.to_json(self.slots)
        for peer in list(self._peers):
            try:
                socket.send_fds(peer.sock, [hello], [self._memfd])
            except OSError:
                self._drop(peer)

    # ---- the ring ----
    def _drop(self, peer: _Peer) -> None:
        if peer in self._peers:
            self._peers.remove(peer)
            peer.sock.close()
            if not self._finished:  # gone before the end of the run
                self._stats["dropped_consumers"] += 1

    def _read_acks(self, peer: _Peer) -> None:
        while True:
            try:
                msg = peer.sock.recv(_MSG.size, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            except OSError:
                msg = b""
            if len(msg) != _MSG.size:  # end of stream (exited, killed) or garbage: it is gone
                return self._drop(peer)
            kind, _slot, seq, *_ = _MSG.unpack(msg)
            if kind == _ACK:
                peer.held.discard(seq)

    def _slot_free(self, seq: int) -> bool:
        # Slot seq % slots last held batch seq - slots: free once no live consumer holds it.
        old = seq - self.slots
        return old < 0 or all(old not in p.held for p in self._peers)

    def _wait_for_slot(self, seq: int) -> None:
        start = time.monotonic()
        while not self._slot_free(seq):
            if self.ack_timeout is not None and time.monotonic() - start > self.ack_timeout:
                for peer in [p for p in self._peers if seq - self.slots in p.held]:
                    self._drop(peer)  # alive but not returning the slot: no longer waited for
                break
            ready = select.select([p.sock for p in self._peers], [], [], 0.5)[0]
            for peer in [p for p in self._peers if p.sock in ready]:
                self._read_acks(peer)
        self._stats["backpressure_seconds"] += time.monotonic() - start

    def _send(self, kind: int, slot: int = 0, seq: int = 0, rows: int = 0, epoch: int = 0, index: int = 0) -> None:
        msg = _MSG.pack(kind, slot, seq, rows, epoch, index)
        for peer in list(self._peers):
            try:
                peer.sock.send(msg)
            except OSError:
                self._drop(peer)
                continue
            if kind == _BATCH:
                peer.held.add(seq)

    def _publish(self, batch, epoch: int, index: int) -> None:
        data, labels, records = batch
        rows = data.shape[0]
        lay = self._layout
        if tuple(data.shape[1:]) != lay.row_shape or data.dtype != lay.dtype or rows > lay.rows:
            raise ValueError(f"l3.shared: batch {data.shape} {data.dtype} does not fit the ring "
                             f"({lay.rows} x {lay.row_shape} {lay.dtype})")
        seq = self._seq
        self._wait_for_slot(seq)
        for peer in self._peers:  # acks that came while the loader worked
            self._read_acks(peer)
        start = time.monotonic()
        slot = seq % self.slots
        d, l, r = lay.views(self._buffer, slot, rows)
        np.copyto(d, data)
        l[:] = labels
        r[:] = records if records is not None else np.arange(rows, dtype=np.uint64)
        self._stats["copy_seconds"] += time.monotonic() - start
        self._send(_BATCH, slot, seq, rows, epoch, index)
        lead = max((seq - min(p.held) + 1 for p in self._peers if p.held), default=0)
        self._stats["max_lead"] = max(self._stats["max_lead"], lead)
        self._stats["batches"] += 1
        self._stats["images"] += rows
        self._seq += 1

    @staticmethod
    def _unpack(batch):
        if isinstance(batch, tuple):
            return np.asarray(batch[0]), np.asarray(batch[1]), None
        records = getattr(batch, "records", None)
        return np.asarray(batch.data), np.asarray(batch.labels), None if records is None else np.asarray(records)

    def _batches(self, epoch: int):
        """(batch, epoch, index) of one pass over the source; the time spent waiting for it counted.
        A pair (data, labels) is batch `index` of pass `epoch`; an l3.Batch says its own."""
        it = iter(self._source)
        index = 0
        while True:
            start = time.monotonic()
            try:
                b = next(it)
            except StopIteration:
                return
            finally:
                self._stats["loader_wait_seconds"] += time.monotonic() - start
            if isinstance(b, tuple):
                yield b, epoch, index
            else:
                yield b, int(getattr(b, "epoch", epoch)), int(getattr(b, "index", index))
            index += 1

    def run(self, epochs: int = 1) -> dict:
        """Waits for the consumers, then streams `epochs` epochs to them (each ends with an
        end-of-epoch mark, the last with the end of the run), then waits up to `linger`
        seconds for them to hang up. Stops early when every consumer is gone. Returns stats()."""
        try:
            self._accept_all()
            for e in range(int(epochs)):
                for batch, epoch, index in self._batches(e):
                    unpacked = self._unpack(batch)
                    if self._buffer is None:
                        self._open_ring(unpacked)
                    if not self._peers:
                        return self.stats()
                    self._publish(unpacked, epoch, index)
                self._send(_EPOCH_END, epoch=e)
            self._finish()
            return self.stats()
        finally:
            self.close()

    def _finish(self) -> None:
        """Sends the end of the run, then waits (at most `linger` seconds) for each consumer
        to hang up, reading its acks meanwhile: closing a Unix socket whose peer's last
        messages are unread would make the peer's pending reads fail (ECONNRESET) before
        it saw the end of the run."""
        self._send(_DONE)
        self._finished = True
        for peer in self._peers:
            try:
                peer.sock.shutdown(socket.SHUT_WR)  # the consumer reads what is queued, then the end
            except OSError:
                pass
        deadline = time.monotonic() + self.linger
        while self._peers and time.monotonic() < deadline:
            ready = select.select([p.sock for p in self._peers], [], [], max(0.0, deadline - time.monotonic()))[0]
            for peer in [p for p in self._peers if p.sock in ready]:
                self._read_acks(peer)

    def stats(self) -> dict:
        """batches, images, loader_wait_seconds (waiting for the loader: decode stalls),
        backpressure_seconds (waiting for the slowest consumer to return a slot),
        copy_seconds, dropped_consumers (gone before the end of the run), max_lead (most
        batches a consumer held at once), consumers (still joined)."""
        return dict(self._stats, consumers=len(self._peers))

    def close(self) -> None:
        for peer in list(self._peers):
            peer.sock.close()
        self._peers = []
        self._listener.close()
        if self._buffer is not None:
            self._buffer.close()  # consumers keep their own mappings: the memory lives while they do
            self._buffer = None
        if self._memfd >= 0:
            os.close(self._memfd)
            self._memfd = -1
        if isinstance(self._source, Loader):
            self._source.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Consumer:
    """Joins the producer `name` (retrying until `timeout` seconds while it is not up yet)
    and iterates its batches: one epoch per `for` loop, like l3.Loader. Each batch is an
    l3.Batch whose arrays are read-only views of the shared ring, valid until the next
    batch is requested (or release() is called): copy what must outlive that."""

    def __init__(self, name: str, timeout: float = 60.0):
        self.name = name
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        deadline = time.monotonic() + float(timeout)
        while True:
            try:
                self._sock.connect(_address(name))
                break
            except (ConnectionRefusedError, FileNotFoundError):
                if time.monotonic() > deadline:
                    self._sock.close()
                    raise TimeoutError(f"l3.shared: no producer {name!r} accepted within {timeout:g} s (none "
                                       "running, or it started without this consumer)") from None
                time.sleep(0.05)
        if _peer_uid(self._sock) != os.getuid():
            self._sock.close()
            raise PermissionError(f"l3.shared: producer {name!r} runs as another user")
        self._sock.settimeout(None)
        msg, fds, _flags, _addr = socket.recv_fds(self._sock, 1 << 16, 1)
        if not msg or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            self._sock.close()
            raise ConnectionError(f"l3.shared: producer {name!r} went away before its first batch")
        self._layout, slots = _Layout.from_json(msg)
        self._buffer = mmap.mmap(fds[0], self._layout.slot_bytes * slots, flags=mmap.MAP_SHARED,
                                 prot=mmap.PROT_READ)
        os.close(fds[0])
        self._held: Optional[int] = None
        self._epoch_over = False
        self._done = False
        self._stats = dict(batches=0, images=0, wait_seconds=0.0, max_wait_seconds=0.0)
        self._started = time.monotonic()

    def release(self) -> None:
        """Returns the current batch's slot to the producer (its arrays must not be used after)."""
        if self._held is not None:
            try:
                self._sock.send(_MSG.pack(_ACK, 0, self._held, 0, 0, 0))
            except OSError:
                pass  # the producer is gone; next() says so
            self._held = None

    def __iter__(self):
        self._epoch_over = False
        return self

    def __next__(self) -> Batch:
        if self._epoch_over or self._done:
            raise StopIteration
        self.release()
        start = time.monotonic()
        try:
            msg = self._sock.recv(_MSG.size)
        except ConnectionResetError:
            msg = b""
        waited = time.monotonic() - start
        if len(msg) != _MSG.size:
            self._done = True
            raise ConnectionError(f"l3.shared: producer {self.name!r} went away (exited or killed mid-run)")
        kind, slot, seq, rows, epoch, index = _MSG.unpack(msg)
        if kind == _EPOCH_END:
            self._epoch_over = True
            raise StopIteration
        if kind == _DONE:
            self._done = True
            raise StopIteration
        self._held = seq
        data, labels, records = self._layout.views(self._buffer, slot, rows)
        s = self._stats
        s["batches"] += 1
        s["images"] += rows
        s["wait_seconds"] += waited
        s["max_wait_seconds"] = max(s["max_wait_seconds"], waited)
        return Batch(data, labels, records, epoch, index, waited)

    @property
    def finished(self) -> bool:
        """True once the producer said the run is over."""
        return self._done

    def stats(self) -> dict:
        """batches, images, wait_seconds (time blocked waiting for batches: the job's data
        stall, as DS-Analyzer measures it), max_wait_seconds, seconds since joining,
        images_per_second."""
        seconds = time.monotonic() - self._started
        return dict(self._stats, seconds=seconds, images_per_second=self._stats["images"] / max(seconds, 1e-9))

    def close(self) -> None:
        self.release()
        self._sock.close()
        try:
            self._buffer.close()
        except BufferError:
            pass  # arrays of a batch still alive: the mapping goes with them

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
