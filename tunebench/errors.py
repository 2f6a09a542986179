"""The one exception tree of tunebench.

    TunebenchError              an expected failure with a message the user can act on
     ├── SpecError              a sweep, batch or result file is malformed (exit code 2)
     ├── UsageError             a command-line value is not allowed (exit code 2)
     ├── DeploymentError        a server could not be started, reached or verified
     ├── LoadError              the load generator failed or produced no usable report
     ├── StoreError             the run directory is locked or unreadable
     │    └── PathError         a run named is not there, or a run cannot be made where asked
     │                          (the user's path is wrong: exit code 2)
     └── UploadError            copying runs to S3 / MinIO failed (bucket, credentials, endpoint)

Lower layers' exceptions (pydantic, httpx, subprocess, OSError) are translated into these
at the seam where they occur; the CLI is the only place that catches them.
"""


class TunebenchError(Exception):
    """Expected failure; `str(exc)` is a single line that says what to do.

    Messages quote what the user wrote (keys, values, paths); a line break or another
    control character in there is shown escaped, so the message stays one line.
    """

    exit_code = 1

    def __init__(self, message: str = "", *args):
        super().__init__(one_line(str(message)), *args)


def one_line(text: str) -> str:
    """`text` with line breaks and other unprintable characters written as escapes."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def tail(text: str, lines: int = 20) -> str:
    """The last `lines` lines of a log, for an error's context."""
    return "\n".join(text.splitlines()[-lines:])


class SpecError(TunebenchError):
    exit_code = 2


class UsageError(TunebenchError):
    exit_code = 2


class DeploymentError(TunebenchError):
    """A server configuration failed; `log_tail` holds the server's last log lines."""

    def __init__(self, message: str, log_tail: str = ""):
        super().__init__(message)
        self.log_tail = log_tail


class LoadError(TunebenchError):
    pass


class StoreError(TunebenchError):
    pass


class PathError(StoreError):
    """A path the user gave is wrong: the run it names is not there, or a run cannot be
    made in the directory it names. Exit 2, as for every bad command-line value: "not found"
    and "cannot write" are the user's to fix, never a failure of the run."""

    exit_code = 2


class UploadError(TunebenchError):
    pass
