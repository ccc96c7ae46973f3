"""Integration test against Ceph's radosgw (spec/format.md §8.5.6): a one-OSD,
memory-backed cluster started by the test on 127.0.0.1 (bench/radosgw_local.sh,
Debian ceph-mon ceph-osd radosgw ceph-common) and stopped by its pid files.

Registered as its own ctest, test_s3_radosgw, when radosgw is installed
(tests/storage.cmake); pytest does not collect this file with tests/s3 (its
name is not test_*.py), so test_s3 never reports it skipped."""
from __future__ import annotations

import json
import subprocess

import pytest

from conftest import ROOT, digest, run, s3_env
import s3_fixture

SCRIPT = ROOT / "bench" / "radosgw_local.sh"
BUCKET = "l3-rgw"


def start_cluster(folder):
    """Starts the cluster on two free ports; returns (port, AK, SK). A start
    that fails (a port taken between free_port and bind, a slow monitor under
    the sanitizers' load) is retried once on new ports; a second failure fails
    the test with the script's stderr and the daemons' log tails."""
    for attempt in (1, 2):
        port, monport = s3_fixture.free_port(), s3_fixture.free_port()
        r = subprocess.run(["bash", str(SCRIPT), "start", str(folder), str(port), str(monport)],
                           capture_output=True, text=True, timeout=180)
        if r.returncode == 0:
            out = r.stdout.split()
            return port, out[-2], out[-1]
        logs = "".join(f"\n--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:])
                       for p in sorted((folder / "log").glob("*")))
        subprocess.run(["bash", str(SCRIPT), "stop", str(folder)], timeout=60)
        if attempt == 2:
            pytest.fail(f"radosgw_local.sh start exited {r.returncode}: {r.stderr.strip()}{logs}")
        print(f"radosgw_local.sh start exited {r.returncode}, retrying: {r.stderr.strip()}{logs}")


@pytest.fixture(scope="module")
def rgw(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rgw")
    try:
        port, ak, sk = start_cluster(folder)
        creds = {"AWS_ACCESS_KEY_ID": ak, "AWS_SECRET_ACCESS_KEY": sk}
        endpoint = f"http://127.0.0.1:{port}"
        import boto3
        from botocore.config import Config
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                              aws_access_key_id=creds["AWS_ACCESS_KEY_ID"],
                              aws_secret_access_key=creds["AWS_SECRET_ACCESS_KEY"],
                              config=Config(s3={"addressing_style": "path"}))
        client.create_bucket(Bucket=BUCKET)
        yield endpoint, creds, client
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", str(folder)], timeout=60)


def test_convert_verify_and_read_on_radosgw(rgw, source_dir, local_ds, tmp_path):
    endpoint, creds, client = rgw
    env = s3_env(endpoint, creds, tmp_path / "cache")
    url = f"s3://{BUCKET}/ds"
    run(["convert", source_dir, url, "--shard-size", "20KiB", "--shuffle-seed", "3"], env=env)
    stored = {o["Key"].rsplit("/", 1)[-1]: o["Size"]
              for o in client.list_objects_v2(Bucket=BUCKET, Prefix="ds/")["Contents"]}
    assert stored == {p.name: p.stat().st_size for p in local_ds.iterdir()}  # the local conversion's files
    assert "0 failed" in run(["verify", url, "--source", source_dir], env=env).stdout
    local = digest(local_ds)
    assert digest(url, env) == local  # cold cache
    assert digest(url, env) == local  # warm cache
    # A cold epoch by blocks: each block once, plus one tail per shard and the manifest.
    shards = json.loads((local_ds / "manifest.json").read_text())["shards"]
    total = sum(s["bytes"] for s in shards)
    r = run(["bench-read", url, "--json", "--crop", "24", "--block", "4"],
            env=dict(env, L3_CACHE_DIR=str(tmp_path / "cold"), L3_S3_BLOCK_SIZE="8192"))
    st = json.loads(r.stdout.strip().splitlines()[-1])["storage"]
    assert total <= st["bytes_downloaded"] <= total * 1.25 and st["retries"] == 0
    assert st["requests"] > 1 + 2 * len(shards)  # several blocks per shard


def test_wrong_secret_on_radosgw_is_one_line_naming_the_bucket(rgw, tmp_path):
    endpoint, creds, _ = rgw
    env = s3_env(endpoint, dict(creds, AWS_SECRET_ACCESS_KEY="not-the-secret-31"), tmp_path / "cache")
    r = run(["info", f"s3://{BUCKET}/ds"], env=env, check=False)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"s3://{BUCKET}/ds" in lines[0] and "403" in lines[0], r.stderr
    assert "not-the-secret-31" not in r.stderr + r.stdout
