"""l3.convert(engine="ray"): one Ray task per part on a loopback Ray cluster, parts
written straight into OUT, a manifest-only commit; the result equals a single-machine
conversion record for record (keys, labels, payload bytes, pixels against the sources)."""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

import l3

SAMPLE = pathlib.Path(__file__).resolve().parents[2] / "bench" / "sample"
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "s3"))
import s3_fixture  # noqa: E402

BUCKET = "l3-ray"


@pytest.fixture(scope="module")
def store():
    """moto's S3 server on 127.0.0.1 (tests/s3/s3_fixture.py): an s3:// OUT for the Ray tasks."""
    with s3_fixture.MotoServer() as server:
        yield server, server.setup(BUCKET)


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory, store):
    server, creds = store
    crash_dir = tmp_path_factory.mktemp("ray-crash")
    saved = dict(os.environ)
    # Inherited by the workers, which start with the cluster: each part crashes
    # once, and the store's address and keys reach the tasks.
    os.environ.update(creds, L3_TEST_RAY_CRASH_DIR=str(crash_dir), RAY_USAGE_STATS_ENABLED="0",
                      AWS_ENDPOINT_URL=server.endpoint, AWS_REGION="us-east-1",
                      L3_CACHE_DIR=str(tmp_path_factory.mktemp("ray-s3-cache")))
    from l3.ray_convert import loopback_only

    loopback_only()  # before ray is imported
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray, crash_dir
    finally:
        ray.shutdown()
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """Class folders: the sample photos and generated images, a file that is not an image
    (a scan skip) and a broken PNG (a decode skip)."""
    src = tmp_path_factory.mktemp("ray-src") / "src"
    rng = np.random.default_rng(4)
    for k, photo in enumerate(sorted(p for p in SAMPLE.iterdir() if p.suffix in (".png", ".jpg"))):
        (src / f"class{k % 2}").mkdir(parents=True, exist_ok=True)
        shutil.copy(photo, src / f"class{k % 2}" / photo.name)
    from PIL import Image

    for i in range(14):
        h, w = 20 + 3 * i, 30 + 5 * i
        img = (np.add.outer(np.arange(h), np.arange(w))[:, :, None] * (i + 1) + rng.integers(0, 9, (h, w, 3))) % 256
        Image.fromarray(img.astype(np.uint8)).save(src / f"class{i % 2}" / f"gen{i:02d}.png")
    (src / "class0" / "notes.txt").write_text("not an image")
    (src / "class1" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    return src


def descendants(pid):
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = open(f"/proc/{d}/stat").read()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(d))
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def listening_addresses(pids):
    """Local addresses of the TCP sockets in LISTEN state that these processes hold."""
    inodes = set()
    for p in pids:
        try:
            for fd in os.listdir(f"/proc/{p}/fd"):
                target = os.readlink(f"/proc/{p}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(table).read().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:  # LISTEN
                found.append(f[1].split(":")[0])
    return found


def is_loopback(hex_address):
    if len(hex_address) == 8:  # IPv4, little-endian bytes
        return bytes.fromhex(hex_address)[::-1][0] == 127
    raw = b"".join(bytes.fromhex(hex_address[i:i + 8])[::-1] for i in range(0, 32, 8))
    return raw == bytes(15) + b"\1" or (raw[:12] == bytes(10) + b"\xff\xff" and raw[12] == 127)


def test_ray_listens_on_loopback_only(ray_cluster):
    ray, _ = ray_cluster
    assert ray.util.get_node_ip_address() == "127.0.0.1"
    found = listening_addresses(descendants(os.getpid()))
    assert found, "no listening socket found for the Ray processes"
    assert all(is_loopback(a) for a in found), found


def records(path):
    ds = l3.Dataset(path)
    return [(ds.key(i), ds.label(i), ds.payload(i)) for i in range(len(ds))]


def test_ray_4_parts_equal_one_machine_record_for_record(tmp_path, ray_cluster, source):
    ray, crash_dir = ray_cluster
    options = dict(shard_size=100_000, shuffle_seed=11, threads=1)
    single = l3.convert(source, tmp_path / "single", **options)
    report = l3.convert(source, tmp_path / "ray", engine="ray", parts=4, **options)
    assert sorted(os.listdir(crash_dir)) == [f"crashed-{i}" for i in range(4)]  # each part's first attempt died
    assert ray.is_initialized()  # the caller's cluster is left running
    assert report["images"] == single["images"] == 20 and len(report["parts"]) == 4
    assert report["skipped"] == single["skipped"] == 2
    got, want = records(tmp_path / "ray"), records(tmp_path / "single")
    assert [(k, lab) for k, lab, _ in got] == [(k, lab) for k, lab, _ in want]
    assert [p for _, _, p in got] == [p for _, _, p in want]  # the encoded bytes, record for record
    ds = l3.Dataset(tmp_path / "ray")
    for i in range(len(ds)):  # pixel-exact against the source files (what verify --source checks)
        image, _ = ds[i]
        assert np.array_equal(image.reshape(l3.load_image(source / ds.key(i)).shape), l3.load_image(source / ds.key(i)))
    a = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    b = json.loads((tmp_path / "single" / "manifest.json").read_text())
    assert a["classes"] == b["classes"] and a["image_stats"] == b["image_stats"]
    assert a["extra"]["l3pack"]["merged_parts"] == 4
    assert (tmp_path / "ray" / "skipped.jsonl").read_text() == (tmp_path / "single" / "skipped.jsonl").read_text()
    names = set(os.listdir(tmp_path / "ray"))
    assert names == {"manifest.json", "skipped.jsonl", *(s["file"] for s in a["shards"])}  # no part files left
    assert all(n.startswith("part-") for n in names if n.endswith(".l3s"))


def test_ray_convert_module_is_the_cli_driver(tmp_path, ray_cluster, source):
    """`l3pack convert --engine ray` runs `python -m l3.ray_convert`: here against the
    running loopback cluster (--address), as a separate driver process."""
    ray, _ = ray_cluster
    address = ray.get_runtime_context().gcs_address
    r = subprocess.run([sys.executable, "-m", "l3.ray_convert", str(source), str(tmp_path / "out"), "--parts", "3",
                        "--shard-size", "100000", "--shuffle-seed", "11", "--threads", "1", "--address", address],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "images:    20 in" in r.stdout and "from 3 Ray tasks" in r.stdout
    single = l3.convert(source, tmp_path / "single", shard_size=100_000, shuffle_seed=11)
    assert records(tmp_path / "out") == records(tmp_path / "single")
    bad = subprocess.run([sys.executable, "-m", "l3.ray_convert", str(source), str(tmp_path / "out"), "--parts", "3",
                          "--address", address], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1 and "already holds a committed dataset" in bad.stderr


def test_engine_argument_errors(tmp_path, source):
    with pytest.raises(ValueError, match="needs parts"):
        l3.convert(source, tmp_path / "o", engine="ray")
    with pytest.raises(ValueError, match="runs the parts itself"):
        l3.convert(source, tmp_path / "o", engine="ray", parts=2, part=(0, 2))
    with pytest.raises(ValueError, match="engine must be"):
        l3.convert(source, tmp_path / "o", engine="dask")
    with pytest.raises(ValueError, match="go with engine='ray'"):
        l3.convert(source, tmp_path / "o", parts=2)


def test_l3pack_engine_ray_end_to_end(tmp_path, ray_cluster, source):
    """The CLI itself: `l3pack convert --engine ray` execs the Python driver ($L3_PYTHON),
    which joins the running loopback cluster (--ray-address). The codec options travel with it:
    --effort 2 --entropy off --tile-width 64 gives the records of l3.convert(effort=2,
    entropy="off", tile_width=64)."""
    l3pack = os.environ.get("L3PACK")
    if not l3pack:
        pytest.skip("no l3pack: scripts/test_python.sh sets L3PACK to the Release build's")
    ray, _ = ray_cluster
    address = ray.get_runtime_context().gcs_address
    r = subprocess.run([l3pack, "convert", str(source), str(tmp_path / "cli"), "--engine", "ray", "--parts", "2",
                        "--shard-size", "100000", "--shuffle-seed", "11", "--ray-address", address,
                        "--effort", "2", "--entropy", "off", "--tile-width", "64"],
                       env=dict(os.environ, L3_PYTHON=sys.executable), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "from 2 Ray tasks" in r.stdout
    single = tmp_path / "single"
    l3.convert(source, single, shard_size=100_000, shuffle_seed=11, effort=2, entropy="off", tile_width=64)
    assert records(tmp_path / "cli") == records(single)
    assert json.load(open(tmp_path / "cli" / "manifest.json"))["extra"]["l3pack"]["options"]["entropy"] == "off"
    bad = subprocess.run([l3pack, "convert", str(source), str(tmp_path / "x"), "--engine", "ray"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--engine ray needs --parts N" in bad.stderr


def test_ray_into_the_store_equals_one_machine(tmp_path, ray_cluster, store, source):
    """Ray tasks writing their shards straight into an s3:// OUT, then the commit there:
    the records of a one-machine conversion, and no part files left in the bucket."""
    server, creds = store
    options = dict(shard_size=100_000, shuffle_seed=11, threads=1)
    report = l3.convert(source, f"s3://{BUCKET}/ray", engine="ray", parts=3, **options)
    assert report["images"] == 20 and len(report["parts"]) == 3
    l3.convert(source, tmp_path / "single", **options)
    assert records(f"s3://{BUCKET}/ray") == records(tmp_path / "single")
    listed = server.client(creds).list_objects_v2(Bucket=BUCKET, Prefix="ray/")["Contents"]
    names = {o["Key"][len("ray/"):] for o in listed}
    assert {n for n in names if not n.endswith(".l3s")} == {"manifest.json", "skipped.jsonl"}
