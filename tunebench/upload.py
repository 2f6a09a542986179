"""Copy run directories to S3 or an S3-compatible store (MinIO, OpenShift Data Foundation).

Credentials come only from boto3's usual sources (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_SESSION_TOKEN, a profile), never from the command line. The endpoint is
`endpoint_url` or AWS_ENDPOINT_URL(_S3); with a custom endpoint, path-style addressing is
used (what MinIO expects). Every boto3/botocore failure becomes one `UploadError` line that
names the bucket or endpoint and what to do; secret values never reach a message.

Keys: a run `R` goes to `<prefix>/<R's id>/<file>`; the whole root (`collect_root`) goes to
`<prefix>/<path under the root>`, so both layouts agree for runs.
"""

from __future__ import annotations

import mimetypes
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from tunebench.errors import UploadError, UsageError
from tunebench.redact import redact_text

_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
# Files being written atomically (.points.csv.123.tmp) and editor/OS droppings are skipped.
_SKIP = re.compile(r"^\..*\.tmp$|^\.DS_Store$")
_CREDENTIAL_CODES = {
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
    "InvalidClientTokenId",
    "AuthorizationHeaderMalformed",
}


@dataclass(frozen=True)
class Destination:
    bucket: str
    prefix: str  # no leading or trailing slash; may be empty

    def key(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def url(self, relative: str = "") -> str:
        return f"s3://{self.bucket}/{self.key(relative)}".rstrip("/") + "/"


def parse_destination(url: str) -> Destination:
    """`s3://bucket[/prefix]` -> Destination; UsageError with the expected form otherwise."""
    if not url.startswith("s3://"):
        raise UsageError(f"destination {url!r}: use s3://BUCKET/PREFIX")
    bucket, _, prefix = url[len("s3://") :].partition("/")
    if not _BUCKET.match(bucket):
        raise UsageError(
            f"destination {url!r}: {bucket!r} is not a valid bucket name "
            "(3-63 lower-case letters, digits, dots, hyphens)"
        )
    return Destination(bucket, prefix.strip("/"))


@dataclass(frozen=True)
class Item:
    path: Path
    relative: str  # key below the destination prefix, '/'-separated
    size: int


def _files(directory: Path) -> Iterable[Path]:
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if not _SKIP.match(name) and path.is_file():
                yield path


def collect_runs(runs: list[Path]) -> list[Item]:
    """Every file of each run directory, keyed `<run id>/<path in the run>`."""
    items = []
    for run in runs:
        for path in _files(run):
            items.append(
                Item(path, f"{run.name}/{path.relative_to(run).as_posix()}", path.stat().st_size)
            )
    return items


def collect_root(root: Path) -> list[Item]:
    """Every file under `root` (runs, comparisons, helm values), keyed by its path there."""
    if not root.is_dir():
        return []
    return [Item(p, p.relative_to(root).as_posix(), p.stat().st_size) for p in _files(root)]


def endpoint_from_env() -> str | None:
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def make_client(endpoint_url: str | None, region: str | None, verify: bool | str | None):
    """An S3 client; `verify`: True/None (system CAs or AWS_CA_BUNDLE), a CA file, or False."""
    import boto3
    from botocore.config import Config

    config = Config(
        retries={"max_attempts": 3, "mode": "standard"},
        connect_timeout=10,
        read_timeout=120,
        s3={"addressing_style": "path"} if endpoint_url else {},
    )
    if verify is False:  # asked for explicitly; one warning per request would bury the progress
        import urllib3

        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    region = (
        region
        or os.environ.get("AWS_DEFAULT_REGION")
        or os.environ.get("AWS_REGION")
        or "us-east-1"
    )
    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint_url,
        region_name=region,
        config=config,
        verify=None if verify is True else verify,
    )


def human_size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def explain(exc: Exception, dest: Destination, where: str, key: str = "") -> UploadError:
    """One line for a boto3/botocore failure, with what to do; secrets redacted."""
    from botocore import exceptions as bx

    if isinstance(exc, bx.ClientError):
        error = exc.response.get("Error", {})
        code = str(
            error.get("Code") or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "?")
        )
        if code in ("NoSuchBucket", "404"):
            text = (
                f"bucket {dest.bucket!r} does not exist at {where}; create it first "
                "(e.g. `mc mb` or `aws s3 mb`) or fix the bucket name"
            )
        elif code in _CREDENTIAL_CODES:
            text = (
                f"{where} rejected the credentials ({code}); check AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (the Secret's keys)"
            )
        elif code in ("AccessDenied", "403", "AllAccessDisabled"):
            text = (
                f"access denied writing s3://{dest.bucket}/{key} at {where} ({code}); "
                "the credentials need s3:PutObject on that bucket and prefix"
            )
        else:
            message = error.get("Message", "")
            text = f"{where} refused s3://{dest.bucket}/{key}: {code}: {message}".rstrip(": ")
    elif isinstance(exc, bx.NoCredentialsError):
        text = (
            "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or an AWS profile)"
        )
    elif isinstance(exc, bx.SSLError):
        text = (
            f"TLS verification failed for {where}; give --ca-bundle FILE with the endpoint's CA "
            "(or, for a test setup only, --no-verify-tls)"
        )
    elif isinstance(
        exc, (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ConnectionClosedError)
    ):
        text = f"cannot reach {where}; check the endpoint URL and that it is reachable from here"
    elif isinstance(exc, bx.BotoCoreError):
        text = f"upload to {where} failed: {exc}"
    else:
        text = f"upload to {where} failed: {type(exc).__name__}: {exc}"
    return UploadError("upload failed: " + redact_text(" ".join(text.split())))


def upload(
    items: list[Item],
    dest: Destination,
    client,
    where: str,
    progress: Callable[[int, int, Item], None] = lambda i, n, item: None,
) -> int:
    """Put every item under `dest`; the first failure raises UploadError. Returns bytes sent."""
    from botocore.exceptions import BotoCoreError, ClientError

    sent = 0
    for index, item in enumerate(items, 1):
        key = dest.key(item.relative)
        content_type = mimetypes.guess_type(item.path.name)[0] or "application/octet-stream"
        try:
            with open(item.path, "rb") as body:
                client.put_object(Bucket=dest.bucket, Key=key, Body=body, ContentType=content_type)
        except OSError as exc:
            raise UploadError(f"upload failed: cannot read {item.path}: {exc.strerror}") from None
        except (ClientError, BotoCoreError) as exc:
            raise explain(exc, dest, where, key) from None
        sent += item.size
        progress(index, len(items), item)
    return sent


__all__ = [
    "Destination",
    "Item",
    "parse_destination",
    "collect_runs",
    "collect_root",
    "make_client",
    "upload",
    "explain",
    "endpoint_from_env",
    "human_size",
]
