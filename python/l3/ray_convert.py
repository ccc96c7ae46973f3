"""Distributed conversion on Ray: one task per `--part i/n`, then a manifest-only commit.

`l3.convert(src, out, engine="ray", parts=n)` and `l3pack convert SRC OUT --engine ray
--parts n` (which runs `python -m l3.ray_convert`) come here. Each Ray task converts one
part with `shared_output=True`: it writes its shards (named part-i-of-n-*.l3s, unique per
part) and its part manifest straight into OUT, so nothing is copied afterwards; the driver
then calls `l3.commit_parts(OUT)`, which checks the n part manifests and writes
manifest.json (spec/format.md §8.4.1). OUT is a folder every worker sees (a shared file
system) or an s3:// prefix; SRC must be readable by every worker under the same path.

A task that fails (its worker process dies, or an OSError such as a network file system
hiccup) is retried up to `max_retries` times; every attempt runs with resume=True, so a
retry keeps the shards the failed attempt finished and redoes the rest (a part that had
finished writes the same part manifest again). Bad input is not retried: under
strict=True the first skip fails the run.

Ray is started here only when the caller has not started it: with `address` (or
$RAY_ADDRESS) it joins that cluster, otherwise it starts a local one whose servers listen
on loopback only (loopback_only()).
Ray's usage statistics are turned off unless the environment says otherwise
(RAY_USAGE_STATS_ENABLED). The same pieces run under any scheduler: see the README
("Converting on many machines") for SLURM job arrays and Dask.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Optional

# Before ray is imported anywhere in this process: no usage reporting by default.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def _crash_once_for_test(index: int) -> None:
    """Tests only: with $L3_TEST_RAY_CRASH_DIR set, the first attempt of each part kills
    its worker process after converting (before returning), so Ray must retry it."""
    folder = os.environ.get("L3_TEST_RAY_CRASH_DIR")
    if folder:
        try:
            os.close(os.open(os.path.join(folder, f"crashed-{index}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
        os._exit(17)


def _convert_part(src: str, out: str, index: int, count: int, options: dict) -> dict:
    import l3  # in the Ray worker

    part = dict(part=(index, count), shared_output=True) if count > 1 else {}  # one part: a plain conversion
    report = l3.convert(src, out, resume=True, **part, **options)
    _crash_once_for_test(index)
    report.pop("skipped_inputs", None)  # in OUT/skipped.part-i-of-n.jsonl; keep the object small
    return report


def loopback_only() -> None:
    """Makes a Ray instance started by this process single-node and loopback-only: Ray then
    advertises 127.0.0.1 and binds its servers there, as it does on macOS and Windows
    (ray._private.ray_constants.ENABLE_RAY_CLUSTER; `_node_ip_address="127.0.0.1"` alone is
    turned into the machine's address). Read when ray is imported: call it before."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


def _start_ray(address: Optional[str], num_cpus: Optional[int]) -> bool:
    """Initialises Ray unless it is; True when this call started it. Without an address
    (argument or $RAY_ADDRESS) it starts a private one-machine instance on loopback."""
    if address is None and "ray" not in sys.modules:
        loopback_only()
    import ray

    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
    if address is None and num_cpus is not None:
        kwargs["num_cpus"] = int(num_cpus)
    ray.init(address=address, **kwargs)
    return True


def convert(src: str, out: str, parts: int, *, address: Optional[str] = None, max_retries: int = 3,
            num_cpus: Optional[int] = None, cpus_per_part: float = 1, **options) -> dict:
    """Converts SRC into OUT with `parts` Ray tasks and commits it. `options` are
    l3.convert's (shard_size, threads, shuffle_seed, ...); `threads` is per task (0: all
    cores of its machine). Returns {"images", "parts": [each part's report], ...}."""
    import l3

    parts = int(parts)
    if parts < 1:
        raise ValueError(f"parts must be >= 1; got {parts}")
    src, out = os.fspath(src), os.fspath(out)
    if not out.startswith("s3://"):
        os.makedirs(out, exist_ok=True)
        out = os.path.abspath(out)  # the workers' working directory is not ours
    src = os.path.abspath(src)
    if options.get("base") is not None:
        options["base"] = os.path.abspath(os.fspath(options["base"]))
    address = address or os.environ.get("RAY_ADDRESS") or None
    started = _start_ray(address, num_cpus)
    import ray

    try:
        task = ray.remote(_convert_part).options(max_retries=int(max_retries), retry_exceptions=[OSError],
                                                 num_cpus=cpus_per_part)
        try:
            reports = ray.get([task.remote(src, out, i, parts, options) for i in range(parts)])
        except ray.exceptions.RayTaskError as e:  # the part's own error (l3's message), not Ray's wrapper
            cause = getattr(e, "cause", None)
            if isinstance(cause, Exception):
                raise cause from None
            raise
    finally:
        if started:
            ray.shutdown()
    images = l3.commit_parts(out) if parts > 1 else reports[0]["images"]
    return {"images": images, "parts": reports,
            "skipped": sum(r["skipped"] for r in reports),
            "shards": sum(r["shards"] for r in reports),
            "bytes_in": sum(r["bytes_in"] for r in reports),
            "bytes_out": sum(r["bytes_out"] for r in reports)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m l3.ray_convert",
                                description="l3pack convert --engine ray: one Ray task per part, then the commit")
    p.add_argument("src")
    p.add_argument("out")
    p.add_argument("--parts", type=int, required=True)
    p.add_argument("--address", default=None, help="Ray cluster (default: $RAY_ADDRESS, else a local one)")
    p.add_argument("--max-retries", type=int, default=3)
    p.add_argument("--shard-size", type=int, default=256 << 20)
    p.add_argument("--shuffle-seed", type=int, default=None)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--max-pixels", type=int, default=None)
    p.add_argument("--layout", default="auto", choices=("auto", "classes", "flat"))
    p.add_argument("--base", default=None)
    p.add_argument("--effort", type=int, default=1)
    p.add_argument("--entropy", default="auto")
    p.add_argument("--tile-width", type=int, default=0)
    p.add_argument("--tile-height", type=int, default=0)
    for flag in ("--strict", "--strict-jpeg", "--convert-16bit", "--allow-empty"):
        p.add_argument(flag, action="store_true")
    a = p.parse_args(argv)
    import l3

    options = dict(shard_size=a.shard_size, shuffle_seed=a.shuffle_seed, threads=a.threads, layout=a.layout,
                   base=a.base, strict=a.strict, strict_jpeg=a.strict_jpeg, convert_16bit=a.convert_16bit,
                   allow_empty=a.allow_empty, max_pixels=a.max_pixels if a.max_pixels is not None else l3.MAX_PIXELS,
                   effort=a.effort, entropy=a.entropy, tile_width=a.tile_width, tile_height=a.tile_height)
    try:
        r = convert(a.src, a.out, a.parts, address=a.address, max_retries=a.max_retries, **options)
    except (OSError, ValueError) as e:
        print(f"l3pack: {e}", file=sys.stderr)
        return 1
    print(f"images:    {r['images']} in {r['shards']} shards from {len(r['parts'])} Ray tasks "
          f"({r['skipped']} skipped)")
    print(f"bytes in:  {r['bytes_in']} (source files)")
    print(f"bytes out: {r['bytes_out']} (shards), committed {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
