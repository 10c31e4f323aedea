"""Does the target implement a signal? Asked after an export of that signal failed.

The SDK exporters only say that an export failed, not why; an empty export request (valid
OTLP) tells a target that lacks a receiver for the signal (gRPC ``UNIMPLEMENTED``, HTTP 404,
405 or 501: Phoenix has no logs receiver) from one that is down or refusing. A signal is given up
(for this process: reported once, its rows marked skipped) only while another signal reaches the
same target, so that a mistyped URL, which answers 404 for everything, is retried rather than
dropped.
"""

from __future__ import annotations

import logging
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable
from enum import Enum
from urllib.parse import urlparse

from toolscore.collector.export.settings import PROTOCOL_GRPC, ExportSettings

log = logging.getLogger(__name__)

HTTP_NOT_IMPLEMENTED = (404, 405, 501)


class Answer(Enum):
    IMPLEMENTED = "implemented"  # the empty request was accepted
    NOT_IMPLEMENTED = "not implemented"
    UNKNOWN = "unknown"  # unreachable, refused, timed out...


def probe(settings: ExportSettings, signal: str) -> Answer:
    """Send ``signal``'s target an empty export request and read its answer."""
    try:
        if settings.protocol_of(signal) == PROTOCOL_GRPC:
            return _probe_grpc(settings, signal)
        return _probe_http(settings, signal)
    except Exception as exc:  # a probe must never break the export pass
        log.debug("probe of %s failed: %s", signal, exc)
        return Answer.UNKNOWN


def _probe_http(settings: ExportSettings, signal: str) -> Answer:
    headers = dict(settings.logs_headers if signal == "logs" else settings.headers)
    headers["content-type"] = "application/x-protobuf"
    request = urllib.request.Request(
        settings.endpoint_of(signal), data=b"", headers=headers, method="POST"
    )
    context = ssl.create_default_context(cafile=settings.certificate_file)
    try:
        with urllib.request.urlopen(request, timeout=settings.timeout_s, context=context):
            return Answer.IMPLEMENTED
    except urllib.error.HTTPError as exc:
        return Answer.NOT_IMPLEMENTED if exc.code in HTTP_NOT_IMPLEMENTED else Answer.UNKNOWN
    except OSError:
        return Answer.UNKNOWN


def _probe_grpc(settings: ExportSettings, signal: str) -> Answer:
    import grpc
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    url = urlparse(settings.endpoint_of(signal))
    target = url.netloc or url.path
    insecure = settings.insecure if settings.insecure is not None else url.scheme == "http"
    if insecure:
        channel = grpc.insecure_channel(target)
    else:
        root = None
        if settings.certificate_file:
            with open(settings.certificate_file, "rb") as f:
                root = f.read()
        channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(root))
    headers = settings.logs_headers if signal == "logs" else settings.headers
    with channel:
        call: Callable[..., object]
        if signal == "logs":
            call = logs_service_pb2_grpc.LogsServiceStub(channel).Export  # type: ignore[no-untyped-call]
            request: object = logs_service_pb2.ExportLogsServiceRequest()
        else:
            call = trace_service_pb2_grpc.TraceServiceStub(channel).Export  # type: ignore[no-untyped-call]
            request = trace_service_pb2.ExportTraceServiceRequest()
        try:
            call(request, metadata=headers, timeout=settings.timeout_s)
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            return (
                Answer.NOT_IMPLEMENTED if code == grpc.StatusCode.UNIMPLEMENTED else Answer.UNKNOWN
            )
    return Answer.IMPLEMENTED


class SignalSupport:
    """Which selected signals the target turned out not to implement (for this process)."""

    def __init__(
        self, settings: ExportSettings, ask: Callable[[ExportSettings, str], Answer] = probe
    ) -> None:
        self._settings = settings
        self._ask = ask
        self.working: set[str] = set()  # signals the target acknowledged
        self.unimplemented: set[str] = set()
        self._warned_all = False

    def delivered(self, signal: str) -> None:
        self.working.add(signal)

    def not_implemented(self, signal: str) -> bool:
        """After ``signal``'s export failed: whether the target lacks it (reported once)."""
        if signal in self.unimplemented:
            return True
        if self._ask(self._settings, signal) is not Answer.NOT_IMPLEMENTED:
            return False
        others = [s for s in self._settings.signals if s != signal]
        if not any(
            s in self.working or self._ask(self._settings, s) is Answer.IMPLEMENTED for s in others
        ):
            if not self._warned_all:
                self._warned_all = True
                log.warning(
                    "write-back: %s answers that it does not implement %s, and no other signal "
                    "reached it: check the endpoint; retrying with backoff",
                    self._settings.endpoint_of(signal),
                    signal,
                )
            return False
        self.unimplemented.add(signal)
        log.warning(
            "write-back: %s does not implement OTLP %s (%s); evaluations are sent as %s only, "
            "and their %s are marked skipped (toolscore_export_skipped_total); "
            "--export-signals %s silences this",
            self._settings.endpoint_of(signal),
            signal,
            "gRPC UNIMPLEMENTED"
            if self._settings.protocol_of(signal) == PROTOCOL_GRPC
            else "HTTP 404/405/501",
            ",".join(others),
            signal,
            ",".join(others),
        )
        return True
