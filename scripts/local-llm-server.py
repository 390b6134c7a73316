"""Serve a GGUF model over llama.cpp's OpenAI-compatible HTTP API on 127.0.0.1 (started by scripts/local-llm.sh).

Usage: python local-llm-server.py MODEL.gguf PORT THREADS [N_CTX [PARALLEL [NAME SHA256]]]
N_CTX (default 8192) is the context of each of the PARALLEL (default 1) slots: the KV cache holds N_CTX * PARALLEL
tokens. NAME and SHA256 (the weights' digest, checked by local-llm.sh) become the model's aliases, `NAME` and
`sha256:<hex>`, which `GET /v1/models` lists: a recording stores them as the identity of the model that answered. Runs until killed; the HTTP server lives on xllamacpp's own threads.
"""

import signal
import sys
import threading

import xllamacpp


def main() -> None:
    model, port, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    n_ctx = int(sys.argv[4]) if len(sys.argv) > 4 else 8192
    parallel = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    aliases = {sys.argv[6], f"sha256:{sys.argv[7]}"} if len(sys.argv) > 7 else set()
    params = xllamacpp.CommonParams()
    params.model.path = model
    if aliases:
        params.model_alias = aliases
    params.hostnames = ["127.0.0.1"]
    params.port = port
    # llama.cpp divides n_ctx among the slots: give each slot the full context.
    params.n_ctx = n_ctx * parallel
    params.n_parallel = parallel
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.n_threads_http = 2
    params.warmup = False
    params.endpoint_metrics = False
    server = xllamacpp.Server(params)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    del server


if __name__ == "__main__":
    main()
