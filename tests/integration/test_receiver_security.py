"""Bearer-token authentication and TLS on both listeners."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

import grpc
import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.integration.serve_harness import RunningServer, agent_spans, count_rows, server_settings

TRACES = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
PB = {"Content-Type": "application/x-protobuf"}


def _self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def test_bearer_token_is_required_on_every_export(sqlite_url: str) -> None:
    spans = agent_spans(tools=3)
    with RunningServer(server_settings(sqlite_url, auth_token="s3cret-token")) as srv:
        with grpc.insecure_channel(srv.grpc_target) as channel:
            call = channel.unary_unary(TRACES)
            for metadata in (
                (),
                (("authorization", "Bearer wrong"),),
                (("authorization", "s3cret-token"),),
            ):
                with pytest.raises(grpc.RpcError) as info:
                    call(b"", metadata=metadata, timeout=5)
                assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED  # never retryable
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            resp = requests.post(f"{srv.http_url}/v1/traces", data=b"", headers={**PB, **headers})
            assert resp.status_code == 401
            assert resp.headers["WWW-Authenticate"] == "Bearer"
        assert requests.get(f"{srv.http_url}/metrics").status_code == 401
        assert count_rows(sqlite_url) == 0

        ok_grpc = GrpcSpanExporter(
            endpoint=srv.grpc_target,
            insecure=True,
            headers={"authorization": "Bearer s3cret-token"},
        )
        ok_http = HttpSpanExporter(
            endpoint=f"{srv.http_url}/v1/traces", headers={"Authorization": "Bearer s3cret-token"}
        )
        assert ok_grpc.export(spans[:1]) == SpanExportResult.SUCCESS
        assert ok_http.export(spans[1:]) == SpanExportResult.SUCCESS
        bad = HttpSpanExporter(endpoint=f"{srv.http_url}/v1/traces")
        assert bad.export(spans) == SpanExportResult.FAILURE
    assert count_rows(sqlite_url) == 3


def test_tls_on_both_listeners(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # requests lets these variables override a Session's own CA file (the exporter uses one)
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    cert, key = _self_signed(tmp_path)
    spans = agent_spans(tools=4)
    with RunningServer(server_settings(sqlite_url, tls_cert=cert, tls_key=key)) as srv:
        creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        grpc_exp = GrpcSpanExporter(endpoint=f"localhost:{srv.grpc_port}", credentials=creds)
        assert grpc_exp.export(spans[:2]) == SpanExportResult.SUCCESS
        http_exp = HttpSpanExporter(
            endpoint=f"https://127.0.0.1:{srv.app.http_port}/v1/traces", certificate_file=str(cert)
        )
        assert http_exp.export(spans[2:]) == SpanExportResult.SUCCESS
        # plaintext clients are refused
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.post(f"http://127.0.0.1:{srv.app.http_port}/v1/traces", data=b"", headers=PB)
        with grpc.insecure_channel(srv.grpc_target) as channel, pytest.raises(grpc.RpcError):
            channel.unary_unary(TRACES)(b"", timeout=3)
    assert count_rows(sqlite_url) == 4
