#!/usr/bin/env python3
"""Decode work and images/s of 1-4 jobs sharing one input pipeline (l3.shared) against
the same jobs each running its own l3.Loader, measured the DS-Analyzer way: every job
records how long it waits for its next batch (its data stall) besides its images/s.

Each job is a process that takes `--batches` batches and "trains" on each for `--step-ms`
(a sleep: GPU time, which costs no CPU here). Modes, for J jobs:
  separate  J processes, each with its own l3.Loader (decode threads in each)
  shared    one l3.shared.Producer process running one l3.Loader, J l3.shared.Consumer processes
Decode work is the CPU time of the processes that decode (the J loader processes, or the
producer), from getrusage; the consumers' own CPU time is reported apart. Rounds interleave
the modes and job counts (the machine is shared: compare figures of the same round), and
the load average is recorded with each run.

    python bench/shared_pipeline.py DATASET --jobs 1 2 3 4 --rounds 3 --json out.json

--transport compares the two ways of handing batches to J processes without decoding at all
(synthetic batches of the loader's shape): l3.shared's memfd ring against Ray's shared-memory
object store (ray.put once per batch, J actors each take it zero-copy), batches/s delivered
to every consumer, with at most --slots batches in flight in both.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import statistics
import sys
import time

import numpy as np


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def loader_options(a) -> dict:
    return dict(batch_size=a.batch_size, size=a.size, workers=a.workers, seed=0, prefetch=a.prefetch)


def train(batches_iter, a) -> dict:
    """Takes a.batches batches from batches_iter (a callable giving the next batch),
    sleeping step-ms after each; returns images/s and the time spent waiting."""
    wait = 0.0
    images = 0
    start = time.monotonic()
    for _ in range(a.batches):
        t = time.monotonic()
        b = batches_iter()
        wait += time.monotonic() - t
        images += len(b)
        if a.step_ms > 0:
            time.sleep(a.step_ms / 1000)
    seconds = time.monotonic() - start
    return dict(images=images, seconds=seconds, images_per_second=images / seconds, wait_seconds=wait)


def endless(make_iter):
    it = [make_iter()]

    def next_batch():
        while True:
            try:
                return next(it[0])
            except StopIteration:
                it[0] = make_iter()  # the next epoch
    return next_batch


def job_separate(a, k, results) -> None:
    import l3

    cpu0 = cpu_seconds()
    with l3.Loader(a.dataset, copy=False, **loader_options(a)) as loader:
        r = train(endless(lambda: iter(loader)), a)
        r["images_decoded"] = int(loader.stats().get("examples", 0))
    r.update(job=k, cpu_seconds=cpu_seconds() - cpu0, decoder=True)
    results.put(r)


def job_consumer(a, k, name, results) -> None:
    import l3.shared

    cpu0 = cpu_seconds()
    with l3.shared.Consumer(name, timeout=120) as c:
        r = train(endless(lambda: iter(c)), a)
    r.update(job=k, cpu_seconds=cpu_seconds() - cpu0, decoder=False)
    results.put(r)


def producer(a, name, jobs, results) -> None:
    import l3.shared

    cpu0 = cpu_seconds()
    p = l3.shared.Producer(a.dataset, name=name, consumers=jobs, slots=a.slots, **loader_options(a))
    # Enough epochs for every job's batches; the run stops once the consumers are gone.
    stats = p.run(epochs=10**6)
    results.put(dict(producer=True, cpu_seconds=cpu_seconds() - cpu0, **stats))


def run_once(a, mode: str, jobs: int, round_: int) -> dict:
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    load0 = os.getloadavg()[0]
    procs = []
    if mode == "shared":
        name = f"bench-{os.getpid()}-{round_}-{jobs}"
        procs.append(ctx.Process(target=producer, args=(a, name, jobs, results)))
        procs += [ctx.Process(target=job_consumer, args=(a, k, name, results)) for k in range(jobs)]
    else:
        procs += [ctx.Process(target=job_separate, args=(a, k, results)) for k in range(jobs)]
    for p in procs:
        p.start()
    out = [results.get(timeout=1800) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    job_rows = [r for r in out if not r.get("producer")]
    prod = [r for r in out if r.get("producer")]
    decode_cpu = sum(r["cpu_seconds"] for r in job_rows if r["decoder"]) + sum(r["cpu_seconds"] for r in prod)
    decoded = sum(r.get("images_decoded", 0) for r in job_rows) + sum(r.get("images", 0) for r in prod)
    return dict(mode=mode, jobs=jobs, round=round_, load_before=load0, load_after=os.getloadavg()[0],
                decode_cpu_seconds=decode_cpu, images_decoded=decoded,
                consumer_cpu_seconds=sum(r["cpu_seconds"] for r in job_rows if not r["decoder"]),
                per_job=sorted(job_rows, key=lambda r: r["job"]), producer=prod[0] if prod else None)


def transport_shm(a, jobs: int, batch) -> float:
    import l3.shared

    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    name = f"transport-{os.getpid()}-{jobs}"
    labels = np.zeros(len(batch), np.int64)
    source = ((batch, labels) for _ in range(a.transport_batches))
    procs = [ctx.Process(target=transport_consumer, args=(name, results)) for _ in range(jobs)]
    producer = l3.shared.Producer(source=source, name=name, consumers=jobs, slots=a.slots)
    for p in procs:
        p.start()
    producer.run(epochs=1)
    got = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    assert all(n == a.transport_batches for n, _, _ in got), got
    # From the first batch any consumer had to the last one every consumer had (joining not counted).
    return (a.transport_batches - 1) / (max(t for _, _, t in got) - min(t for _, t, _ in got))


def transport_consumer(name, results) -> None:
    import l3.shared

    n, first = 0, None
    with l3.shared.Consumer(name) as c:
        for b in c:
            float(b.data.reshape(-1)[0])  # touch the shared memory
            n += 1
            first = first or time.time()
    results.put((n, first, time.time()))


def transport_ray(a, jobs: int, batch) -> float:
    from l3.ray_convert import loopback_only

    loopback_only()
    import ray

    ray.init(num_cpus=jobs + 1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        @ray.remote(num_cpus=1)
        class Job:
            def take(self, data):  # a numpy argument arrives as a read-only view of the object store
                return float(data.reshape(-1)[0])

        actors = [Job.remote() for _ in range(jobs)]
        ray.get([j.take.remote(ray.put(batch)) for j in actors])  # started and warm: the first batch
        start = time.monotonic()
        in_flight = []
        for _ in range(a.transport_batches - 1):
            ref = ray.put(batch)  # one copy into the object store, as l3.shared copies into its ring
            in_flight.append([j.take.remote(ref) for j in actors])
            if len(in_flight) >= a.slots:
                ray.get(in_flight.pop(0))  # back-pressure: at most `slots` batches outstanding
        for futures in in_flight:
            ray.get(futures)
        return (a.transport_batches - 1) / (time.monotonic() - start)
    finally:
        ray.shutdown()


def compare_transports(a) -> None:
    shape = (a.batch_size, 3, a.size, a.size)
    batch = np.random.default_rng(0).random(shape, dtype=np.float32)
    print(f"transport: {a.transport_batches} batches of {shape} float32 ({batch.nbytes / 2**20:.1f} MiB), "
          f"slots {a.slots}, load {os.getloadavg()[0]:.1f}")
    print("| consumers | round | l3.shared batches/s | Ray object store batches/s | shared / Ray |")
    print("|--|--|--|--|--|")
    for r in range(a.rounds):
        for jobs in a.jobs:
            shm = transport_shm(a, jobs, batch)
            ray_rate = transport_ray(a, jobs, batch)
            print(f"| {jobs} | {r} | {shm:.1f} | {ray_rate:.1f} | {shm / ray_rate:.2f} |", flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", nargs="?", help="a converted dataset (not needed with --transport)")
    p.add_argument("--jobs", type=int, nargs="+", default=[1, 2, 3, 4])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batches", type=int, default=40, help="batches each job takes")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--workers", type=int, default=2, help="decode threads of each loader")
    p.add_argument("--prefetch", type=int, default=2)
    p.add_argument("--slots", type=int, default=4, help="ring slots of the shared pipeline")
    p.add_argument("--step-ms", type=float, default=0.0, help="simulated training step per batch (sleep)")
    p.add_argument("--json", default=None, help="write every run here")
    p.add_argument("--transport", action="store_true", help="compare l3.shared's ring with Ray's object store")
    p.add_argument("--transport-batches", type=int, default=200)
    a = p.parse_args()
    if a.transport:
        compare_transports(a)
        return 0
    runs = []
    for r in range(a.rounds):
        for jobs in a.jobs:
            for mode in ("separate", "shared"):
                run = run_once(a, mode, jobs, r)
                runs.append(run)
                ips = [j["images_per_second"] for j in run["per_job"]]
                print(f"round {r} {mode:8s} jobs={jobs} load={run['load_before']:.1f}->{run['load_after']:.1f} "
                      f"decode_cpu={run['decode_cpu_seconds']:.1f}s decoded={run['images_decoded']} "
                      f"img/s per job={[round(v, 1) for v in ips]} "
                      f"wait per job={[round(j['wait_seconds'], 2) for j in run['per_job']]}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(args=vars(a), runs=runs), f, indent=1)
    summarize(runs, a)
    return 0


def summarize(runs, a) -> None:
    """Per round: shared/separate decode CPU, and each shared job's images/s over the same
    round's one-job-alone (separate, jobs=1) images/s; medians over rounds."""
    print(f"\n| jobs | decode CPU shared/separate | images decoded shared/separate | min job img/s shared / "
          f"alone | min job img/s separate / alone | mean wait per job shared, separate (s) |")
    print("|--|--|--|--|--|--|")
    for jobs in a.jobs:
        cpu, dec, sh, se, wsh, wse = [], [], [], [], [], []
        for r in range(a.rounds):
            get = {(x["mode"], x["jobs"]): x for x in runs if x["round"] == r}
            alone = get[("separate", 1)]["per_job"][0]["images_per_second"]
            s, p = get[("shared", jobs)], get[("separate", jobs)]
            cpu.append(s["decode_cpu_seconds"] / p["decode_cpu_seconds"])
            dec.append(s["images_decoded"] / max(p["images_decoded"], 1))
            sh.append(min(j["images_per_second"] for j in s["per_job"]) / alone)
            se.append(min(j["images_per_second"] for j in p["per_job"]) / alone)
            wsh.append(statistics.mean(j["wait_seconds"] for j in s["per_job"]))
            wse.append(statistics.mean(j["wait_seconds"] for j in p["per_job"]))
        med = statistics.median
        print(f"| {jobs} | {med(cpu):.3f} ({min(cpu):.3f}-{max(cpu):.3f}) | {med(dec):.3f} | "
              f"{med(sh):.3f} ({min(sh):.3f}-{max(sh):.3f}) | {med(se):.3f} ({min(se):.3f}-{max(se):.3f}) | "
              f"{med(wsh):.2f}, {med(wse):.2f} |")


if __name__ == "__main__":
    sys.exit(main())
