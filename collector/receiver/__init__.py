"""OTLP receivers: gRPC (:mod:`.grpc_server`) and HTTP (:mod:`.http_server`) over one core."""
