"""An OTLP/HTTP receiver for the telemetry tests: takes what an exporter POSTs to /v1/traces and /v1/metrics
(protobuf, as OpenTelemetry's own generated classes read it), and appends each request to FILE as one JSON line
{"signal": "traces"|"metrics", "body": <the request as OTLP's JSON mapping>}. Listens on 127.0.0.1 (port 0 picks a
free one) and prints "listening on PORT" once it does. Usage: otlp-receiver.py FILE [PORT]"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

SIGNALS = {
    "/v1/traces": ("traces", trace_service_pb2.ExportTraceServiceRequest, trace_service_pb2.ExportTraceServiceResponse),
    "/v1/metrics": (
        "metrics",
        metrics_service_pb2.ExportMetricsServiceRequest,
        metrics_service_pb2.ExportMetricsServiceResponse,
    ),
}


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        signal = SIGNALS.get(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if signal is None or self.headers.get("Content-Type") != "application/x-protobuf":
            self.send_response(404 if signal is None else 415)
            self.end_headers()
            return
        name, request_type, response_type = signal
        request = request_type()
        request.ParseFromString(body)
        with open(sys.argv[1], "a", encoding="utf-8") as out:
            out.write(json.dumps({"signal": name, "body": MessageToDict(request)}) + "\n")
        answer = response_type().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2]) if len(sys.argv) > 2 else 0), Receiver)
print(f"listening on {server.server_address[1]}", flush=True)
server.serve_forever()
