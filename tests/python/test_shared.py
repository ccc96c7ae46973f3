"""l3.shared: one producer runs the loader once, consumer processes each receive every
batch in order, zero-copy from a shared ring; a killed consumer does not stall the
others; nothing is left in /dev/shm."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import l3
import l3.shared

TIMEOUT = 60  # seconds any one wait may take before the test fails
LOADER = dict(batch_size=4, size=16, seed=3, workers=2)

# A consumer process: joins `name`, writes one JSON line per batch (digests, labels,
# whether the data lies in the shared ring), "epoch" lines at epoch ends; after
# `hold` batches (if > 0) it writes "holding" and stops there, keeping its slot.
CONSUMER = r"""
import hashlib, json, sys, time
import numpy as np
import l3.shared
name, out, epochs, hold = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with open(out, "w", buffering=1) as f, l3.shared.Consumer(name, timeout=60) as c:
    ring = np.frombuffer(c._buffer, dtype=np.uint8)
    lo = ring.ctypes.data
    hi = lo + ring.nbytes
    n = 0
    for e in range(epochs):
        for b in c:
            p = b.data.ctypes.data
            f.write(json.dumps({"epoch": int(b.epoch), "index": int(b.index),
                                "data": hashlib.sha256(b.data.tobytes()).hexdigest(),
                                "labels": b.labels.tolist(), "records": b.records.tolist(),
                                "in_ring": bool(lo <= p and p + b.data.nbytes <= hi),
                                "writeable": bool(b.data.flags.writeable)}) + "\n")
            n += 1
            if n == hold:
                f.write("holding\n")
                time.sleep(3600)
        f.write("epoch\n")
    assert not list(c)  # the end of the run: nothing more
    f.write(json.dumps({"stats": c.stats(), "finished": c.finished}) + "\n")
"""


def start_consumer(tmp_path, name, k, epochs, hold=0):
    out = tmp_path / f"consumer{k}.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", CONSUMER, name, str(out), str(epochs), str(hold)])
    return proc, out


def read_lines(path):
    return [l for l in path.read_text().splitlines()] if path.exists() else []


def batches_of(lines):
    return [json.loads(l) for l in lines if l.startswith("{\"epoch\"")]


def wait_for(predicate, what):
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def run_producer(producer, epochs):
    result = {}
    thread = threading.Thread(target=lambda: result.update(producer.run(epochs=epochs)), daemon=True)
    thread.start()
    return thread, result


def shm_entries():
    """Names in /dev/shm that could be ours (the machine's other processes use it too)."""
    return {n for n in os.listdir("/dev/shm") if "l3" in n}


def ring_mappings(pid):
    """The producer's shared mappings: its ring must be a memfd, never a /dev/shm file."""
    maps = open(f"/proc/{pid}/maps").read().splitlines()
    return [l.split(None, 5)[-1] for l in maps if "memfd:" in l or "/dev/shm/" in l]


def expected_batches(path, epochs):
    """What one l3.Loader with the same options gives, batch by batch."""
    out = []
    with l3.Loader(path, **LOADER) as loader:
        for _ in range(epochs):
            for b in loader:
                out.append({"epoch": b.epoch, "index": b.index,
                            "data": hashlib.sha256(np.ascontiguousarray(b.data).tobytes()).hexdigest(),
                            "labels": b.labels.tolist(), "records": b.records.tolist()})
    return out


def test_three_consumers_receive_identical_batches_in_order(tmp_path, small_dataset):
    path, _ = small_dataset
    shm_before = shm_entries()
    name = f"t3-{os.getpid()}"
    producer = l3.shared.Producer(path, name=name, consumers=3, slots=2, **LOADER)
    procs = [start_consumer(tmp_path, name, k, epochs=2) for k in range(3)]
    thread, stats = run_producer(producer, epochs=2)
    for proc, _ in procs:
        assert proc.wait(timeout=TIMEOUT) == 0
    thread.join(timeout=TIMEOUT)
    assert not thread.is_alive()
    want = expected_batches(path, 2)
    assert len(want) == 2 * 10  # 40 records, batches of 4
    for _, out in procs:
        lines = read_lines(out)
        got = batches_of(lines)
        assert all(g["in_ring"] and not g["writeable"] for g in got)  # zero-copy, read-only views of the ring
        assert [{k: g[k] for k in want[0]} for g in got] == want  # every batch, in order, as one loader gives
        assert lines.count("epoch") == 2
        tail = json.loads(lines[-1])
        assert tail["finished"] and tail["stats"]["images"] == 80
    assert stats["batches"] == 20 and stats["images"] == 80  # decoded once for all three
    assert stats["dropped_consumers"] == 0
    assert 1 <= stats["max_lead"] <= 2  # back-pressure: no consumer is ever more than `slots` behind
    assert shm_entries() == shm_before


def test_killed_consumer_does_not_stall_the_others(tmp_path, small_dataset):
    path, _ = small_dataset
    name = f"kill-{os.getpid()}"
    producer = l3.shared.Producer(path, name=name, consumers=3, slots=2, **LOADER)
    stuck, stuck_out = start_consumer(tmp_path, name, 0, epochs=3, hold=3)  # stops after 3 batches, slot held
    others = [start_consumer(tmp_path, name, k, epochs=3) for k in (1, 2)]
    thread, stats = run_producer(producer, epochs=3)
    try:
        wait_for(lambda: "holding" in read_lines(stuck_out), "the stuck consumer")
        time.sleep(0.5)
        # Back-pressure: the stuck consumer holds the ring, so the others cannot be far ahead.
        assert all(len(batches_of(read_lines(out))) <= 3 + 2 for _, out in others)
        stuck.send_signal(signal.SIGKILL)
        for proc, _ in others:
            assert proc.wait(timeout=TIMEOUT) == 0
        thread.join(timeout=TIMEOUT)
        assert not thread.is_alive()
    finally:
        stuck.kill()
        stuck.wait()
    for _, out in others:
        assert len(batches_of(read_lines(out))) == 30
        assert json.loads(read_lines(out)[-1])["finished"]
    assert stats["dropped_consumers"] == 1 and stats["batches"] == 30


def test_a_stopped_consumer_is_dropped_after_ack_timeout(tmp_path, small_dataset):
    path, _ = small_dataset
    name = f"stop-{os.getpid()}"
    producer = l3.shared.Producer(path, name=name, consumers=2, slots=2, ack_timeout=1.0, **LOADER)
    stuck, stuck_out = start_consumer(tmp_path, name, 0, epochs=1, hold=1)
    other, out = start_consumer(tmp_path, name, 1, epochs=1)
    thread, stats = run_producer(producer, epochs=1)
    try:
        wait_for(lambda: "holding" in read_lines(stuck_out), "the stuck consumer")
        stuck.send_signal(signal.SIGSTOP)  # alive, its socket open, never acknowledging
        assert other.wait(timeout=TIMEOUT) == 0
        thread.join(timeout=TIMEOUT)
        assert not thread.is_alive()
    finally:
        stuck.kill()
        stuck.wait()
    assert len(batches_of(read_lines(out))) == 10
    assert stats["dropped_consumers"] == 1


PRODUCER = r"""
import sys, l3.shared
l3.shared.Producer(sys.argv[1], name=sys.argv[2], consumers=1, slots=2, batch_size=4, size=16, seed=3,
                   workers=2).run(epochs=1000)
"""


def test_killed_producer_leaves_no_shared_memory_and_consumers_get_an_error(tmp_path, small_dataset):
    path, _ = small_dataset
    name = f"prod-{os.getpid()}"
    shm_before = shm_entries()
    proc = subprocess.Popen([sys.executable, "-c", PRODUCER, str(path), name])
    try:
        consumer = l3.shared.Consumer(name, timeout=TIMEOUT)
        first = next(iter(consumer))
        assert first.data.shape == (4, 3, 16, 16)
        assert ring_mappings(proc.pid) == [f"/memfd:l3.shared.{name} (deleted)"]  # anonymous: no /dev/shm name
        assert shm_entries() == shm_before
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=TIMEOUT)
        with pytest.raises(ConnectionError, match="went away"):
            for _ in range(100):  # the batches already sent, then the end of the stream
                for _ in consumer:
                    pass
        consumer.close()
    finally:
        proc.kill()
        proc.wait()
    assert shm_entries() == shm_before
    # The name (an abstract socket) went with the process: a new producer can take it at once.
    l3.shared.Producer(source=[], name=name, consumers=1).close()


def test_name_taken_late_joiner_and_join_timeout(tmp_path, small_dataset):
    path, _ = small_dataset
    name = f"names-{os.getpid()}"
    data = np.zeros((2, 3), np.float32)
    with l3.shared.Producer(source=[(data, np.arange(2))], name=name, consumers=1, join_timeout=0.3) as p:
        with pytest.raises(ValueError, match="taken"):
            l3.shared.Producer(source=[], name=name, consumers=1)
        with pytest.raises(TimeoutError, match="0 of 1 consumers joined"):
            p.run()
    with pytest.raises(ValueError, match="host batches"):
        l3.shared.Producer(path, name=name, consumers=1, device="cuda")
    with pytest.raises(TimeoutError, match="no producer"):
        l3.shared.Consumer(name, timeout=0.2)  # the run ended: the name is free, nobody answers
