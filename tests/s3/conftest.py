"""Fixtures of the object-storage tests: a dataset converted locally, a moto
S3 server (signatures checked) holding a copy, and the l3pack under test."""
from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import s3_fixture  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "l3-test"
TIMEOUT = 120  # seconds, any one l3pack run


def l3pack_path() -> str:
    p = os.environ.get("L3PACK") or str(ROOT / "build" / "converters" / "l3pack")
    if not os.access(p, os.X_OK):
        pytest.fail(f"l3pack not found at {p} (set L3PACK)")
    return p


def run(args, env=None, check=True, timeout=TIMEOUT) -> subprocess.CompletedProcess:
    r = subprocess.run([l3pack_path(), *map(str, args)], env=env, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"l3pack {' '.join(map(str, args))} exited {r.returncode}: {r.stderr.strip()}")
    return r


def write_ppm(path: Path, rng: random.Random) -> None:
    w, h = rng.randint(24, 80), rng.randint(24, 80)
    # Smooth-ish pixels (so the codec has something to do), deterministic.
    base = [rng.randrange(256) for _ in range(3)]
    pixels = bytearray()
    for y in range(h):
        for x in range(w):
            for c in range(3):
                pixels.append((base[c] + 3 * x + 5 * y + rng.randrange(16)) & 255)
    path.write_bytes(b"P6\n%d %d\n255\n" % (w, h) + bytes(pixels))


@pytest.fixture(scope="session")
def local_ds(tmp_path_factory) -> Path:
    """~90 images in 3 classes, converted into ~12 small shards."""
    root = tmp_path_factory.mktemp("l3s3")
    src = root / "src"
    rng = random.Random(18)
    for cls in ("ant", "bee", "cow"):
        (src / cls).mkdir(parents=True)
        for i in range(30):
            write_ppm(src / cls / f"{i:03d}.ppm", rng)
    out = root / "ds"
    run(["convert", src, out, "--shard-size", "20KiB", "--shuffle-seed", "3"])
    return out


@pytest.fixture(scope="session")
def source_dir(local_ds) -> Path:
    return local_ds.parent / "src"


@pytest.fixture(scope="session")
def moto():
    with s3_fixture.MotoServer() as server:
        server.creds = server.setup(BUCKET)
        server.s3 = server.client(server.creds)
        yield server


@pytest.fixture(scope="session")
def remote_ds(moto, local_ds) -> str:
    s3_fixture.upload_dir(moto.s3, BUCKET, "datasets/ds", str(local_ds))
    return f"s3://{BUCKET}/datasets/ds"


def s3_env(endpoint: str, creds: dict, cache: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(creds)
    env.update(AWS_ENDPOINT_URL=endpoint, AWS_REGION="us-east-1", L3_CACHE_DIR=str(cache), HOME=str(cache.parent))
    env.update({k: str(v) for k, v in extra.items()})
    return env


def digest(dataset, env=None, *extra) -> str:
    """The --digest of two epochs of the reader (block shuffle, random crops)."""
    r = run(["bench-read", dataset, "--digest", "--epochs", "2", "--batch", "8", "--crop", "24", "--block", "4",
             "--seed", "7", "--workers", "2", *extra], env=env)
    lines = [l for l in r.stdout.splitlines() if l.startswith("digest: ")]
    assert len(lines) == 1, r.stdout
    return lines[0].split()[1]
