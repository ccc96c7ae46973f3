"""Reading datasets from an S3 server (moto, signatures checked): the CLI on
s3:// URLs, byte-identical epochs, the shard cache, wrong keys, secrets."""
from __future__ import annotations

import json
import os

from conftest import BUCKET, digest, run, s3_env


def test_info_ls_verify_read_s3_like_local(moto, remote_ds, local_ds, tmp_path):
    env = s3_env(moto.endpoint, moto.creds, tmp_path / "cache")
    info_s3 = json.loads(run(["info", remote_ds, "--json"], env=env).stdout)
    info_local = json.loads(run(["info", local_ds, "--json"]).stdout)
    for k in ("records", "shards", "classes"):
        if k in info_local:
            assert info_s3[k] == info_local[k], k
    assert run(["ls", remote_ds], env=env).stdout == run(["ls", local_ds]).stdout
    v = run(["verify", remote_ds], env=env)
    assert "0 failed" in v.stdout


def test_epoch_from_s3_is_byte_identical_to_local(moto, remote_ds, local_ds, tmp_path):
    env = s3_env(moto.endpoint, moto.creds, tmp_path / "cache")
    local = digest(local_ds)
    assert digest(remote_ds, env) == local          # cold cache: downloaded
    assert sorted(os.listdir(tmp_path / "cache")) == cache_files(local_ds)
    assert digest(remote_ds, env) == local          # warm cache
    # Other ranks, another seed: still the local bytes.
    for extra in (["--world", "2", "--rank", "1"], ["--echo", "2", "--mode", "center"]):
        expected = digest(local_ds, None, *extra)
        assert expected != local  # the digest sees the difference
        assert digest(remote_ds, env, *extra) == expected


def test_warm_cache_downloads_no_shard(moto, local_ds, tmp_path):
    s3_fixture_upload(moto, local_ds, "warm/ds")
    url = f"s3://{BUCKET}/warm/ds"
    env = s3_env(moto.endpoint, moto.creds, tmp_path / "cache")
    local = digest(local_ds)
    assert digest(url, env) == local
    # Remove the shard objects: only manifest.json is left in the store.
    for name in os.listdir(local_ds):
        if name.endswith(".l3s"):
            moto.s3.delete_object(Bucket=BUCKET, Key=f"warm/ds/{name}")
    assert digest(url, env) == local
    show = run(["cache"], env=env).stdout
    assert f"{len(os.listdir(tmp_path / 'cache'))} files" in show
    run(["cache", "clear"], env=env)
    assert "0 files" in run(["cache"], env=env).stdout
    r = run(["bench-read", url, "--crop", "24"], env=env, check=False)  # cold again, shards gone
    assert r.returncode == 1
    assert "404" in r.stderr and f"s3://{BUCKET}/warm/ds/shard-" in r.stderr


def cache_files(local_ds) -> list:
    """The cache files a whole epoch leaves (spec/format.md §8.5.3): per shard, its tail
    (the suffix GET for trailer and index) and its one block of records (the test shards
    are far smaller than the 8 MiB blocks)."""
    names = []
    for s in json.loads((local_ds / "manifest.json").read_text())["shards"]:
        data = (local_ds / s["file"]).read_bytes()
        index_at = int.from_bytes(data[-64:-56], "little")
        tail = min(s["bytes"], 64 + s["records"] * (48 + 64) + 2048)
        names.append(f"{s['xxh3']}-{s['bytes']}.{s['bytes'] - tail}-{tail}.l3b")
        names.append(f"{s['xxh3']}-{s['bytes']}.0-{index_at}.l3b")
    return sorted(names)


def s3_fixture_upload(moto, folder, prefix, change=None):
    for name in sorted(os.listdir(folder)):
        data = (folder / name).read_bytes()
        if change and name == change:
            data = data[:100] + bytes([data[100] ^ 1]) + data[101:]
        moto.s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{name}", Body=data)


def test_shard_changed_under_the_manifest_is_detected(moto, local_ds, tmp_path):
    manifest = json.loads((local_ds / "manifest.json").read_text())
    victim = manifest["shards"][1]["file"]
    s3_fixture_upload(moto, local_ds, "changed/ds", change=victim)
    env = s3_env(moto.endpoint, moto.creds, tmp_path / "cache")
    r = run(["bench-read", f"s3://{BUCKET}/changed/ds", "--crop", "24"], env=env, check=False)
    assert r.returncode == 1
    assert "checksum mismatch" in r.stderr and f"s3://{BUCKET}/changed/ds/{victim}" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    # The block that does not match the index is not cached (its tail, intact, is).
    assert not any(n.startswith(f"{manifest['shards'][1]['xxh3']}-{manifest['shards'][1]['bytes']}.0-")
                   for n in os.listdir(tmp_path / "cache"))
    v = run(["verify", f"s3://{BUCKET}/changed/ds"], env=env, check=False)
    assert v.returncode == 1 and victim in v.stderr


def test_cached_copy_changed_on_disk_is_fetched_again(moto, remote_ds, local_ds, tmp_path):
    env = s3_env(moto.endpoint, moto.creds, tmp_path / "cache")
    local = digest(local_ds)
    assert digest(remote_ds, env) == local
    cached = sorted((tmp_path / "cache").iterdir())[0]
    data = bytearray(cached.read_bytes())
    data[50] ^= 0xFF
    cached.write_bytes(bytes(data))
    assert digest(remote_ds, env) == local  # detected by hash, downloaded again
    assert cached.read_bytes() != bytes(data)


def test_wrong_secret_is_one_line_naming_the_bucket(moto, remote_ds, tmp_path):
    creds = dict(moto.creds, AWS_SECRET_ACCESS_KEY="wrong-secret-9f8e7d")
    env = s3_env(moto.endpoint, creds, tmp_path / "cache")
    for cmd in (["info", remote_ds], ["bench-read", remote_ds], ["verify", remote_ds], ["ls", remote_ds]):
        r = run(cmd, env=env, check=False)
        assert r.returncode == 1, cmd
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        assert f"s3://{BUCKET}/" in lines[0] and "403" in lines[0] and "SignatureDoesNotMatch" in lines[0]
        assert "wrong-secret-9f8e7d" not in r.stderr + r.stdout


def test_unknown_key_id_and_missing_bucket(moto, remote_ds, tmp_path):
    creds = dict(moto.creds, AWS_ACCESS_KEY_ID="AKIANOTAKEY000000000")
    r = run(["info", remote_ds], env=s3_env(moto.endpoint, creds, tmp_path / "c1"), check=False)
    assert r.returncode == 1 and "403" in r.stderr and f"s3://{BUCKET}/" in r.stderr
    r = run(["info", "s3://no-such-bucket/ds"], env=s3_env(moto.endpoint, moto.creds, tmp_path / "c2"), check=False)
    assert r.returncode == 1 and "s3://no-such-bucket/ds/manifest.json" in r.stderr and "404" in r.stderr


def test_secrets_never_printed(moto, remote_ds, tmp_path):
    env = s3_env(moto.endpoint, moto.creds, tmp_path / "cache")
    secret = moto.creds["AWS_SECRET_ACCESS_KEY"]
    out = ""
    for cmd in (["info", remote_ds], ["ls", remote_ds], ["verify", remote_ds], ["bench-read", remote_ds, "--crop", "24"],
                ["bench-read", remote_ds, "--crop", "24", "--json"], ["cache"]):
        r = run(cmd, env=env)
        out += r.stdout + r.stderr
    assert out and secret not in out
    for name in os.listdir(tmp_path / "cache"):
        assert secret not in name


def test_session_token_is_sent_and_signed(moto, remote_ds, local_ds, tmp_path):
    from fault_proxy import FaultProxy
    proxy = FaultProxy(moto.port).start()
    try:
        env = s3_env(proxy.endpoint, moto.creds, tmp_path / "cache", AWS_SESSION_TOKEN="tok-abc123")
        run(["info", remote_ds], env=env, check=False)  # moto may or may not accept a made-up token
        h = proxy.headers[0]
        assert h["x-amz-security-token"] == "tok-abc123"
        assert "x-amz-security-token" in h["authorization"].split("SignedHeaders=")[1]
        assert moto.creds["AWS_SECRET_ACCESS_KEY"] not in json.dumps(proxy.headers)
    finally:
        proxy.stop()


def test_anonymous_access_sends_no_signature(local_ds, tmp_path):
    """A public bucket: a server without auth, AWS_NO_SIGN_REQUEST=true."""
    import s3_fixture
    from fault_proxy import FaultProxy
    with s3_fixture.MotoServer(auth=False) as server:
        client = server.client({"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"})
        client.create_bucket(Bucket="public-bkt")
        client.put_bucket_policy(Bucket="public-bkt", Policy=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                           "Resource": "arn:aws:s3:::public-bkt/*"}]}))
        s3_fixture.upload_dir(client, "public-bkt", "ds", str(local_ds))
        proxy = FaultProxy(server.port).start()
        try:
            env = s3_env(proxy.endpoint, {"AWS_ACCESS_KEY_ID": "AKIAUNUSED", "AWS_SECRET_ACCESS_KEY": "unused"},
                         tmp_path / "cache", AWS_NO_SIGN_REQUEST="true")
            assert digest("s3://public-bkt/ds", env) == digest(local_ds)
            assert proxy.headers and not any("authorization" in h for h in proxy.headers)
        finally:
            proxy.stop()


def test_processes_share_one_cache(moto, remote_ds, local_ds, tmp_path):
    """Three readers at once on an empty cache: no locks, no shared memory, same epochs,
    one file per shard and no temporaries left."""
    import subprocess
    from conftest import l3pack_path
    env = s3_env(moto.endpoint, moto.creds, tmp_path / "cache")
    cmd = [l3pack_path(), "bench-read", remote_ds, "--digest", "--epochs", "2", "--batch", "8", "--crop", "24",
           "--block", "4", "--seed", "7", "--workers", "2"]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    local = digest(local_ds)
    for (out, err), p in zip(outs, procs):
        assert p.returncode == 0, err
        assert f"digest: {local}" in out
    assert sorted(os.listdir(tmp_path / "cache")) == cache_files(local_ds)  # no temporaries left


def test_lru_limit_smaller_than_the_dataset(moto, remote_ds, local_ds, tmp_path):
    sizes = [s["bytes"] for s in json.loads((local_ds / "manifest.json").read_text())["shards"]]
    limit = sum(sizes) // 3
    env = s3_env(moto.endpoint, moto.creds, tmp_path / "cache", L3_CACHE_MAX_BYTES=limit)
    local = digest(local_ds)
    assert digest(remote_ds, env) == local
    assert digest(remote_ds, env) == local  # evicted shards are fetched again
    held = sum((tmp_path / "cache" / n).stat().st_size for n in os.listdir(tmp_path / "cache"))
    assert 0 < held <= limit
    assert f"{limit} bytes (LRU)" in run(["cache"], env=env).stdout


def test_endpoint_url_option_wins_over_the_environment(moto, remote_ds, tmp_path):
    from conftest import s3_fixture
    dead = f"http://127.0.0.1:{s3_fixture.free_port()}"
    env = s3_env(dead, moto.creds, tmp_path / "cache", L3_S3_MAX_ATTEMPTS=1)
    assert run(["info", remote_ds], env=env, check=False).returncode == 1
    info = json.loads(run(["--endpoint-url", moto.endpoint, "info", remote_ds, "--json"], env=env).stdout)
    assert info["records"] == 90


def test_dataset_rewritten_in_the_store_is_read_anew(moto, local_ds, source_dir, tmp_path):
    """Shards replaced in the store under the same names, with their new manifest:
    the cached blocks of the old ones (keyed by the old hashes) are not used."""
    other = tmp_path / "other"
    run(["convert", source_dir, other, "--shard-size", "20KiB", "--shuffle-seed", "4"])
    url = f"s3://{BUCKET}/swap/ds"
    env = s3_env(moto.endpoint, moto.creds, tmp_path / "cache")
    s3_fixture_upload(moto, local_ds, "swap/ds")
    assert digest(url, env) == digest(local_ds)
    s3_fixture_upload(moto, other, "swap/ds")  # same shard names, other bytes
    assert digest(url, env) == digest(other) != digest(local_ds)
