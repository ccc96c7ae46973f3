"""l3pack convert SRC s3://bucket/prefix: shards uploaded as they finish
(multipart above L3_S3_PART_SIZE), manifest.json last with If-None-Match: *,
--resume and --part against the store."""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import time

import pytest

from conftest import BUCKET, digest, l3pack_path, run, s3_env, write_ppm


def keys(moto, prefix):
    r = moto.s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix + "/")
    return {o["Key"][len(prefix) + 1:]: o["Size"] for o in r.get("Contents", [])}


def test_convert_to_s3_then_verify_and_read_like_local(moto, source_dir, local_ds, tmp_path):
    env = s3_env(moto.endpoint, moto.creds, tmp_path / "cache")
    url = f"s3://{BUCKET}/converted/ds"
    r = run(["convert", source_dir, url, "--shard-size", "20KiB", "--shuffle-seed", "3"], env=env)
    assert moto.creds["AWS_SECRET_ACCESS_KEY"] not in r.stdout + r.stderr  # progress and report
    stored = keys(moto, "converted/ds")
    local = {n: (local_ds / n).stat().st_size for n in os.listdir(local_ds)}
    assert stored == local  # the same shards and manifest, nothing else (no plan, no temporaries)
    for name in local:
        assert moto.s3.get_object(Bucket=BUCKET, Key=f"converted/ds/{name}")["Body"].read() == (local_ds / name).read_bytes()
    v = run(["verify", url, "--source", source_dir], env=env)
    assert "0 failed" in v.stdout
    assert digest(url, env) == digest(local_ds)
    assert not (tmp_path / "cache" / "convert").exists() or not os.listdir(tmp_path / "cache" / "convert")
    # A committed dataset is never overwritten.
    r = run(["convert", source_dir, url, "--shard-size", "20KiB"], env=env, check=False)
    assert r.returncode != 0 and "already holds a committed dataset" in r.stderr
    manifest = moto.s3.get_object(Bucket=BUCKET, Key="converted/ds/manifest.json")["Body"].read().decode()
    assert moto.creds["AWS_SECRET_ACCESS_KEY"] not in manifest and moto.creds["AWS_ACCESS_KEY_ID"] not in manifest


def test_manifest_put_is_if_none_match(moto, source_dir, tmp_path):
    env = s3_env(moto.endpoint, moto.creds, tmp_path / "cache")
    # A committed prefix is refused up front.
    moto.s3.put_object(Bucket=BUCKET, Key="race/ds/manifest.json", Body=b"{}")
    r = run(["convert", source_dir, f"s3://{BUCKET}/race/ds"], env=env, check=False)
    assert r.returncode != 0 and "already holds a committed dataset" in r.stderr
    # A manifest that appears while the conversion runs (another writer, after
    # the check) is not overwritten: the final PUT carries If-None-Match: *.
    from fault_proxy import FaultProxy
    raced = []

    def other_writer(method, path):
        if method == "PUT" and path.endswith(".l3s") and not raced:
            raced.append(path)
            moto.s3.put_object(Bucket=BUCKET, Key="race2/ds/manifest.json", Body=b"theirs")

    proxy = FaultProxy(moto.port, on_request=other_writer).start()
    try:
        env = s3_env(proxy.endpoint, moto.creds, tmp_path / "cache2")
        r = run(["convert", source_dir, f"s3://{BUCKET}/race2/ds"], env=env, check=False)
        assert raced and r.returncode == 1
        assert "If-None-Match" in r.stderr and "manifest.json" in r.stderr
        put = [h for h in proxy.headers if h.get("if-none-match")]
        assert len(put) == 1 and put[0]["if-none-match"] == "*"
        assert moto.s3.get_object(Bucket=BUCKET, Key="race2/ds/manifest.json")["Body"].read() == b"theirs"
    finally:
        proxy.stop()


def test_large_shard_is_a_multipart_upload(moto, tmp_path):
    src = tmp_path / "big"
    rng = random.Random(5)
    (src / "x").mkdir(parents=True)
    for i in range(3):  # noise compresses badly: ~2.4 MB of shard per image, > 5 MiB in all
        w, h = 1024, 768
        (src / "x" / f"{i}.ppm").write_bytes(b"P6\n%d %d\n255\n" % (w, h) + rng.randbytes(w * h * 3))
    env = s3_env(moto.endpoint, moto.creds, tmp_path / "cache", L3_S3_PART_SIZE=5 << 20)
    url = f"s3://{BUCKET}/big/ds"
    run(["convert", src, url, "--shard-size", "1GiB"], env=env)
    head = moto.s3.head_object(Bucket=BUCKET, Key="big/ds/shard-00000.l3s")
    assert head["ContentLength"] > 5 << 20
    assert head["ETag"].strip('"').endswith("-2")  # S3's multipart ETag: <md5>-<parts>
    assert "0 failed" in run(["verify", url], env=env).stdout


def test_resume_against_the_store(moto, source_dir, local_ds, tmp_path):
    """Kill a conversion once some shards are in the store; --resume finishes it
    and the result equals the local conversion."""
    env = s3_env(moto.endpoint, moto.creds, tmp_path / "cache")
    url = f"s3://{BUCKET}/resumed/ds"
    args = [l3pack_path(), "convert", str(source_dir), url, "--shard-size", "20KiB", "--shuffle-seed", "3",
            "--threads", "1"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if len([k for k in keys(moto, "resumed/ds") if k.endswith(".l3s")]) >= 2:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    partial = keys(moto, "resumed/ds")
    assert "manifest.json" not in partial, "the conversion finished before it could be interrupted"
    assert len(partial) >= 2
    r = run(["convert", source_dir, url, "--shard-size", "20KiB", "--shuffle-seed", "3"], env=env, check=False)
    assert r.returncode != 0 and "--resume" in r.stderr  # not empty: a fresh run is refused
    run(["convert", source_dir, url, "--shard-size", "20KiB", "--shuffle-seed", "3", "--resume"], env=env)
    assert keys(moto, "resumed/ds") == {n: (local_ds / n).stat().st_size for n in os.listdir(local_ds)}
    assert digest(url, env) == digest(local_ds)


def test_parts_into_the_store(moto, source_dir, tmp_path):
    env = s3_env(moto.endpoint, moto.creds, tmp_path / "cache")
    records = 0
    for i in range(2):
        url = f"s3://{BUCKET}/parts/p{i}"
        run(["convert", source_dir, url, "--part", f"{i}/2", "--shard-size", "20KiB"], env=env)
        names = keys(moto, f"parts/p{i}")
        assert all(n.startswith(f"part-{i}-of-2-") for n in names if n.endswith(".l3s"))
        records += json.loads(run(["info", url, "--json"], env=env).stdout)["records"]
    assert records == 90


def test_skipped_inputs_travel_with_the_dataset(moto, tmp_path):
    """skipped.jsonl is uploaded before the manifest, so verify --source on the
    store accounts for the skipped inputs as it does locally (spec §8.5.5)."""
    env = s3_env(moto.endpoint, moto.creds, tmp_path / "cache")
    src = tmp_path / "src"
    rng = random.Random(7)
    for cls in ("ant", "bee"):
        (src / cls).mkdir(parents=True)
        for i in range(3):
            write_ppm(src / cls / f"{i}.ppm", rng)
    (src / "bee" / "broken.png").write_bytes(b"not a png")
    url = f"s3://{BUCKET}/skips/ds"
    run(["convert", src, url], env=env)
    listed = moto.s3.get_object(Bucket=BUCKET, Key="skips/ds/skipped.jsonl")["Body"].read().decode()
    assert [json.loads(line)["path"] for line in listed.splitlines()] == ["bee/broken.png"]
    v = run(["verify", url, "--source", src], env=env)
    assert "6 passed, 0 failed" in v.stdout
    assert "1 recorded as skipped at convert time, 0 not accounted for" in v.stdout


def test_parts_into_one_prefix_then_commit_in_place(moto, source_dir, local_ds, tmp_path):
    """--part i/3 --shared-out into one s3:// prefix (each part stages in its own folder),
    then `merge --in-place` commits it from the part manifests: the records of one run."""
    env = s3_env(moto.endpoint, moto.creds, tmp_path / "cache")
    url = f"s3://{BUCKET}/shared/ds"
    for part in ("1/3", "0/3", "2/3"):
        run(["convert", source_dir, url, "--shard-size", "20KiB", "--shuffle-seed", "3", "--part", part,
             "--shared-out"], env=env)
    stored = keys(moto, "shared/ds")
    assert "manifest.json" not in stored
    assert {f"manifest.part-{i}-of-3.json" for i in range(3)} <= set(stored)
    assert not (tmp_path / "cache" / "convert").exists() or not os.listdir(tmp_path / "cache" / "convert")
    r = run(["merge", "--in-place", url], env=env)
    assert "90 records" in r.stdout
    stored_after = keys(moto, "shared/ds")
    assert set(stored_after) - set(stored) == {"manifest.json", "skipped.jsonl"}  # no shard copied
    # The parts' own files are deleted once the commit is in (§8.4.1): shards and the dataset's files remain.
    assert not [n for n in stored_after if n.startswith("manifest.part-") or n.startswith("skipped.part-")
                or n.startswith(".l3pack.")]
    assert {n for n in stored_after if not n.endswith(".l3s")} == {"manifest.json", "skipped.jsonl"}
    assert run(["ls", url, "--json"], env=env).stdout.replace("part-", "").count("\n") == 90
    v = run(["verify", url, "--source", source_dir], env=env)
    assert "0 failed" in v.stdout
    assert digest(url, env) == digest(local_ds)
    committed = json.loads(moto.s3.get_object(Bucket=BUCKET, Key="shared/ds/manifest.json")["Body"].read())
    assert committed["image_stats"] == json.loads((local_ds / "manifest.json").read_text())["image_stats"]
    r = run(["merge", "--in-place", url], env=env, check=False)
    assert r.returncode == 1 and "already holds a committed dataset" in r.stderr


def test_resume_on_another_machine(moto, source_dir, local_ds, tmp_path):
    """--resume with none of the interrupted run's local state (another machine:
    another cache and staging folder): the plan and the shards come from the store."""
    url = f"s3://{BUCKET}/elsewhere/ds"
    args = ["convert", str(source_dir), url, "--shard-size", "20KiB", "--shuffle-seed", "3"]
    first = s3_env(moto.endpoint, moto.creds, tmp_path / "machine-a" / "cache")
    proc = subprocess.Popen([l3pack_path(), *args, "--threads", "1"], env=first,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if len([k for k in keys(moto, "elsewhere/ds") if k.endswith(".l3s")]) >= 3:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    partial = keys(moto, "elsewhere/ds")
    assert "manifest.json" not in partial and "l3pack-plan.json" in partial
    shutil.rmtree(tmp_path / "machine-a")  # nothing of machine A is left
    second = s3_env(moto.endpoint, moto.creds, tmp_path / "machine-b" / "cache")
    run([*args, "--resume"], env=second)
    assert keys(moto, "elsewhere/ds") == {n: (local_ds / n).stat().st_size for n in os.listdir(local_ds)}
    assert digest(url, second) == digest(local_ds)
    # A plan in the store that is not this run's (here: not a plan at all) is
    # refused as a local one is.
    moto.s3.put_object(Bucket=BUCKET, Key="elsewhere/other/l3pack-plan.json", Body=b'{"not": "this plan"}')
    r = run(["convert", str(source_dir), f"s3://{BUCKET}/elsewhere/other", "--shard-size", "20KiB", "--resume"],
            env=s3_env(moto.endpoint, moto.creds, tmp_path / "machine-c" / "cache"), check=False)
    assert r.returncode != 0 and "different sources or options" in r.stderr


def test_merge_takes_parts_in_the_store(moto, source_dir, tmp_path):
    env = s3_env(moto.endpoint, moto.creds, tmp_path / "cache")
    for i in range(2):
        run(["convert", source_dir, f"s3://{BUCKET}/mparts/p{i}", "--part", f"{i}/2", "--shard-size", "20KiB"], env=env)
        run(["convert", source_dir, tmp_path / f"p{i}", "--part", f"{i}/2", "--shard-size", "20KiB"])
    run(["merge", tmp_path / "local", tmp_path / "p0", tmp_path / "p1"])
    parts = [f"s3://{BUCKET}/mparts/p{i}" for i in range(2)]
    run(["merge", tmp_path / "from-store", *parts], env=env)
    local = {n: (tmp_path / "local" / n).read_bytes() for n in os.listdir(tmp_path / "local")}
    assert {n: (tmp_path / "from-store" / n).read_bytes() for n in os.listdir(tmp_path / "from-store")} == local
    # Into the store as well: the same objects, manifest last.
    run(["merge", f"s3://{BUCKET}/mparts/merged", *parts], env=env)
    assert keys(moto, "mparts/merged") == {n: len(b) for n, b in local.items()}
    assert digest(f"s3://{BUCKET}/mparts/merged", env) == digest(tmp_path / "local")
    r = run(["merge", f"s3://{BUCKET}/mparts/merged", *parts], env=env, check=False)
    assert r.returncode != 0 and "already holds a committed dataset" in r.stderr
