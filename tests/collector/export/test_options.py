"""The write-back flags of ``toolscore serve``, as parsed from a real command line."""

from __future__ import annotations

import pytest

from toolscore.collector.cli import build_parser
from toolscore.collector.configuration import ConfigError
from toolscore.collector.export.options import settings_from


def _args(*argv: str) -> object:
    return build_parser().parse_args(["serve", *argv])


def test_flags_configure_the_write_back_and_thresholds() -> None:
    args = _args(
        "--export-endpoint",
        "http://otel:4318",
        "--export-protocol",
        "http/protobuf",
        "--export-header",
        "authorization=Bearer%20t",
        "--export-compression",
        "gzip",
        "--export-timeout",
        "3",
        "--pass-threshold",
        "tool_call_f1=0.8",
        "--pass-threshold",
        "strict=1",
    )
    settings, thresholds = settings_from(args, {"OTEL_EXPORTER_OTLP_HEADERS": "tenant=a"})  # type: ignore[arg-type]
    assert settings is not None
    assert settings.traces_endpoint == "http://otel:4318/v1/traces"
    assert settings.headers == (("tenant", "a"), ("authorization", "Bearer t"))
    assert (settings.compression, settings.timeout_s) == ("gzip", 3.0)
    assert thresholds == {"tool_call_f1": 0.8, "strict": 1.0}


def test_no_endpoint_or_no_export_means_no_write_back_but_thresholds_still_apply() -> None:
    settings, thresholds = settings_from(_args("--pass-threshold", "a=0.5"), {})  # type: ignore[arg-type]
    assert settings is None and thresholds == {"a": 0.5}
    env = {"TOOLSCORE_EXPORT_ENDPOINT": "http://otel:4317"}
    assert settings_from(_args(), env)[0] is not None  # type: ignore[arg-type]
    agents = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}
    assert settings_from(_args(), agents)[0] is None  # type: ignore[arg-type]
    assert settings_from(_args("--no-export"), env)[0] is None  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["f1", "f1=high", "f1=1.5", "=0.5"])
def test_bad_threshold_is_rejected(value: str) -> None:
    with pytest.raises(ConfigError, match=r"--pass-threshold / TOOLSCORE_PASS_THRESHOLDS: exp"):
        settings_from(_args("--pass-threshold", value), {})  # type: ignore[arg-type]


def test_serve_refuses_to_start_with_a_bad_write_back_setting(
    capsys: pytest.CaptureFixture[str], sqlite_url: str
) -> None:
    from toolscore.collector.cli import main

    status = main(["serve", "--db", sqlite_url, "--export-endpoint", "otel:4317"])
    assert status == 2  # a usage error, reported before anything listens
    err = capsys.readouterr().err
    assert "--export-endpoint / TOOLSCORE_EXPORT_ENDPOINT: expected http(s)://" in err
    assert "got 'otel:4317'" in err
