#!/usr/bin/env python3
"""A tracking server that fails: HTTP 500 with an MLflow-style JSON error to every request, each one logged
to stderr ("POST /api/2.0/mlflow/runs/create 500").
Usage: failing_mlflow_server.py PORT   (listens on 127.0.0.1)
"""
import http.server
import json
import sys


class Failing(http.server.BaseHTTPRequestHandler):
    def fail(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        body = json.dumps({"error_code": "INTERNAL_ERROR",
                           "message": "the backend store is unavailable (test server)"}).encode()
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = fail

    def log_message(self, format, *args):
        sys.stderr.write("%s %s\n" % (self.command, self.path))
        sys.stderr.flush()


http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Failing).serve_forever()
