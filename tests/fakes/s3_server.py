"""A local S3 server (moto) that enforces credentials, for the upload tests.

moto's backends are process-wide, so one server serves the whole test session (the `s3`
fixture in tests/conftest.py): the fixture creates a user with an access key, creates the
bucket, then switches authentication on, so a wrong secret or an unknown key id really is
refused, as MinIO or AWS would refuse it.
"""

from __future__ import annotations

import json
import logging
import socket
import urllib.request
from dataclasses import dataclass
from typing import Iterator

import boto3
from moto import server as moto_server

BUCKET = "runs"
SECRET_NAME = "tunebench-s3"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class S3:
    endpoint: str
    key_id: str
    secret: str

    def client(self):
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=self.key_id,
            aws_secret_access_key=self.secret,
        )

    def keys(self, prefix: str = "") -> set[str]:
        pages = (
            self.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        )
        return {o["Key"] for page in pages for o in page.get("Contents", [])}

    def secrets(self, secret: str | None = None, key_id: str | None = None) -> dict:
        return {
            (SECRET_NAME, "AWS_ACCESS_KEY_ID"): key_id or self.key_id,
            (SECRET_NAME, "AWS_SECRET_ACCESS_KEY"): secret or self.secret,
        }


def _set_auth(endpoint: str, count: str) -> None:
    request = urllib.request.Request(
        f"{endpoint}/moto-api/reset-auth",
        data=count.encode(),
        method="POST",
        headers={"Content-Type": "text/plain"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


def serve_s3() -> Iterator["S3"]:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    # port 0: the server binds a free port itself (no window for another process to take it)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        bootstrap = dict(
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="bootstrap",
            aws_secret_access_key="bootstrap",
        )
        iam = boto3.client("iam", **bootstrap)
        iam.create_user(UserName="tunebench")
        iam.put_user_policy(
            UserName="tunebench",
            PolicyName="s3",
            PolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
                }
            ),
        )
        key = iam.create_access_key(UserName="tunebench")["AccessKey"]
        boto3.client("s3", **bootstrap).create_bucket(Bucket=BUCKET)
        _set_auth(endpoint, "0")  # from now on every request must be signed by a known key
        yield S3(endpoint, key["AccessKeyId"], key["SecretAccessKey"])
    finally:
        _set_auth(endpoint, "inf")  # moto's setting is process-wide: restore it
        server.stop()
