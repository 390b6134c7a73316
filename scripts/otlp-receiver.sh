#!/usr/bin/env bash
# Installs what the OTLP receiver of the telemetry tests needs (idempotent): OpenTelemetry's own protobuf classes
# (`opentelemetry-proto` from PyPI, pinned, with `protobuf`) in a virtual environment under $LESSRT_CACHE_DIR (default
# ~/.cache/lessrt). Prints the venv's python, which runs `scripts/otlp-receiver.py`.
set -euo pipefail
exec bash "$(dirname "$0")/venv.sh" otlp-venv opentelemetry-proto 1.45.2
