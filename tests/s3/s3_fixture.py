"""A real S3 server for the tests: moto's server on 127.0.0.1 (spec/format.md §8.5.6).

moto checks SigV4 signatures only once INITIAL_NO_AUTH_ACTION_COUNT requests
have been served; the fixture spends exactly those on creating an IAM user
with an allow-all policy, its access key and the bucket, so every later
request (the ones l3 makes) must be signed with that key. Started on a free
port, waited for with a bounded loop, stopped by its own PID.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

# IAM CreateUser, PutUserPolicy, CreateAccessKey, S3 CreateBucket.
SETUP_ACTIONS = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def moto_python() -> str:
    """A Python that can import moto: $L3_MOTO_PYTHON, else this one."""
    return os.environ.get("L3_MOTO_PYTHON", sys.executable)


class MotoServer:
    def __init__(self, port: int | None = None, auth: bool = True):
        self.port = port or free_port()
        self.auth = auth
        self.proc: subprocess.Popen | None = None
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> "MotoServer":
        env = dict(os.environ)
        if self.auth:
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(SETUP_ACTIONS)
        self.proc = subprocess.Popen(
            [moto_python(), "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto server exited with {self.proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"moto server did not listen on port {self.port} within {timeout} s")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.proc = None

    def setup(self, bucket: str) -> dict:
        """The SETUP_ACTIONS unauthenticated calls: user, policy, key, bucket. Returns the key."""
        import boto3  # moto depends on boto3
        kw = dict(endpoint_url=self.endpoint, region_name="us-east-1",
                  aws_access_key_id="setup", aws_secret_access_key="setup")
        iam = boto3.client("iam", **kw)
        iam.create_user(UserName="l3")
        iam.put_user_policy(UserName="l3", PolicyName="all", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="l3")["AccessKey"]
        creds = {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}
        boto3.client("s3", **kw).create_bucket(Bucket=bucket)
        return creds

    def client(self, creds: dict):
        import boto3
        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=creds["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=creds["AWS_SECRET_ACCESS_KEY"])

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def upload_dir(client, bucket: str, prefix: str, folder: str) -> None:
    for name in sorted(os.listdir(folder)):
        client.upload_file(os.path.join(folder, name), bucket, f"{prefix}/{name}")
