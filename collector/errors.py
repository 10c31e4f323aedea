"""Errors and the ONE mapping from them to statuses: gRPC and HTTP for the receiver, exit
statuses for commands (docs/cli.md, "Exit status"; ``collector/cli.py`` prints them).

Retryable conditions (queue full, too many requests in flight, database unavailable, shutting
down) become UNAVAILABLE / 503 with a retry delay, so exporters retry; permanent ones
(undecodable body, too large, bad auth) use codes that exporters never retry (docs/receiver.md,
Responses).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import grpc


class Failure(Exception):
    """The command could not do its work (a database, a file, the network): exit status 1."""

    status = 1


class UsageError(Failure):
    """The command was asked something it cannot do (a bad flag, variable or file): status 2."""

    status = 2


class ReceiverError(Exception):
    """Base of every error the receiver answers with a status."""


class RetryableError(ReceiverError):
    """A temporary condition: the client should send the same data again after a delay."""

    reason = "unavailable"

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class QueueFull(RetryableError):
    reason = "queue_full"


class TooManyRequests(RetryableError):
    """More export requests in flight than ``--max-concurrent-requests``.

    UNAVAILABLE + RetryInfo rather than RESOURCE_EXHAUSTED (what grpc's own
    ``maximum_concurrent_rpcs`` answers, with no RetryInfo): the Collector's exporter treats the
    latter as permanent and drops the data.
    """

    reason = "concurrency_limit"


class StorageUnavailable(RetryableError):
    reason = "storage_unavailable"


class ShuttingDown(RetryableError):
    reason = "shutting_down"


class RequestTooLarge(ReceiverError):
    """The request body is over the size limit (after decompression)."""


class Unauthenticated(ReceiverError):
    """Missing or wrong bearer token."""


class UnsupportedMediaType(ReceiverError):
    """The Content-Type is neither application/x-protobuf nor application/json."""


class UnsupportedEncoding(ReceiverError):
    """A Content-Encoding we do not decode, or a body that does not match it."""


class UnstorableData(ReceiverError):
    """The database refused this request's content (found by isolating it from its batch).

    Resending the same data cannot succeed, so it is answered like an invalid body; the message
    says what kind of value was refused, never the database's own text.
    """


@dataclass(frozen=True, slots=True)
class ErrorStatus:
    grpc_code: grpc.StatusCode
    http_status: int
    message: str
    retry_after_s: float | None = None


def status_for(exc: BaseException) -> ErrorStatus:
    """How to answer ``exc`` over gRPC and over HTTP."""
    import grpc  # here, as the decoder below: commands import this module, not protobuf

    from toolscore.collector.otlp.decode import DecodeError

    message = client_text(str(exc) or type(exc).__name__)
    if isinstance(exc, RetryableError):
        return ErrorStatus(grpc.StatusCode.UNAVAILABLE, 503, message, exc.retry_after_s)
    if isinstance(exc, DecodeError | UnsupportedEncoding | UnstorableData):
        return ErrorStatus(grpc.StatusCode.INVALID_ARGUMENT, 400, message)
    if isinstance(exc, RequestTooLarge):
        # RESOURCE_EXHAUSTED without RetryInfo: non-retryable for spec-following clients
        return ErrorStatus(grpc.StatusCode.RESOURCE_EXHAUSTED, 413, message)
    if isinstance(exc, Unauthenticated):
        return ErrorStatus(grpc.StatusCode.UNAUTHENTICATED, 401, message)
    if isinstance(exc, UnsupportedMediaType):
        return ErrorStatus(grpc.StatusCode.UNIMPLEMENTED, 415, message)
    # A bug of ours: non-retryable, so a poison request is not resent for ever. Its text may
    # come from anywhere (a database driver naming hosts and ports): the log has it, not clients.
    return ErrorStatus(
        grpc.StatusCode.INTERNAL, 500, f"internal error ({type(exc).__name__}); see the server log"
    )


MAX_MESSAGE_CHARS = 1000


def client_text(message: str) -> str:
    """``message`` as a status message can carry it: valid UTF-8 (a lone surrogate from a JSON
    body would make the status itself unserialisable) and at most MAX_MESSAGE_CHARS long (a
    parse error may quote a whole value)."""
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 1] + "…"
    return message.encode("utf-8", "backslashreplace").decode("utf-8")


def rpc_status_bytes(status: ErrorStatus) -> bytes:
    """``google.rpc.Status`` (with RetryInfo when retryable), serialised."""
    from google.rpc import status_pb2

    msg = status_pb2.Status(code=status.grpc_code.value[0], message=status.message)
    if status.retry_after_s is not None:
        msg.details.add().Pack(_retry_info(status.retry_after_s))
    return bytes(msg.SerializeToString())


def grpc_trailers(status: ErrorStatus) -> tuple[tuple[str, bytes], ...]:
    """Trailing metadata: RetryInfo both where Go clients (status details) and the Python
    exporter (``google.rpc.retryinfo-bin``) look for it."""
    if status.retry_after_s is None:
        return ()
    return (
        ("grpc-status-details-bin", rpc_status_bytes(status)),
        ("google.rpc.retryinfo-bin", _retry_info(status.retry_after_s).SerializeToString()),
    )


def _retry_info(seconds: float):  # type: ignore[no-untyped-def]
    from google.rpc import error_details_pb2

    info = error_details_pb2.RetryInfo()
    whole = int(seconds)
    info.retry_delay.seconds = whole
    info.retry_delay.nanos = round((seconds - whole) * 1e9)
    return info
