#!/usr/bin/env python3
"""Kubeflow Trainer v2.2's TrainJob status endpoint, for tests: HTTPS on loopback with a certificate the
test's own CA signed. Like the controller's server (pkg/statusserver), it takes POST
/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status with a bearer token and
a JSON UpdateTrainJobStatusRequest, and answers errors with a Kubernetes Status. It checks more than the
controller does: the token must be the expected one and the body must have the fields and bounds of the
TrainerStatus schema. Every accepted body is appended to --log as one JSON line; rejections are appended
as {"rejected": reason}. With --fail every request gets a 500.

    status_server.py --port N --cert server.pem --key server.key --token TOKEN --path PATH --log FILE [--fail]
"""
import argparse
import http.server
import json
import re
import ssl
import sys

RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def problems(body):
    """What is wrong with an UpdateTrainJobStatusRequest, as a list of reasons."""
    status = body.get("trainerStatus")
    if not isinstance(status, dict):
        return ["no trainerStatus object"]
    wrong = [f"unknown field {key}" for key in status
             if key not in ("progressPercentage", "estimatedRemainingSeconds", "metrics", "lastUpdatedTime")]
    progress = status.get("progressPercentage")
    if not isinstance(progress, int) or not 0 <= progress <= 100:
        wrong.append(f"progressPercentage {progress!r} is not an integer from 0 to 100")
    remaining = status.get("estimatedRemainingSeconds")
    if remaining is not None and (not isinstance(remaining, int) or remaining < 0 or remaining > 2**31 - 1):
        wrong.append(f"estimatedRemainingSeconds {remaining!r} is not a non-negative int32")
    if not RFC3339.match(str(status.get("lastUpdatedTime", ""))):
        wrong.append("lastUpdatedTime is missing or not RFC 3339")
    metrics = status.get("metrics", [])
    if not isinstance(metrics, list) or len(metrics) > 256:
        wrong.append("metrics is not a list of at most 256")
    else:
        for metric in metrics:
            for key in ("name", "value"):
                text = metric.get(key) if isinstance(metric, dict) else None
                if not isinstance(text, str) or not 1 <= len(text) <= 64:
                    wrong.append(f"metric {metric!r}: {key} is not a string of 1 to 64 characters")
    return wrong


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--fail", action="store_true")
    options = parser.parse_args()

    class Handler(http.server.BaseHTTPRequestHandler):
        def answer(self, code, message, reason):
            status = {"kind": "Status", "apiVersion": "v1", "status": "Failure" if code >= 400 else "Success",
                      "message": message, "reason": reason, "code": code}
            data = json.dumps(status).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def record(self, entry):
            with open(options.log, "a") as log:
                log.write(json.dumps(entry) + "\n")

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if options.fail:
                return self.answer(500, "Internal error", "InternalError")
            if self.path != options.path:
                self.record({"rejected": f"path {self.path}"})
                return self.answer(404, "Not found", "NotFound")
            if self.headers.get("Authorization") != f"Bearer {options.token}":
                self.record({"rejected": "token"})
                return self.answer(403, "Forbidden", "Forbidden")
            try:
                request = json.loads(body)
            except ValueError:
                request = None
            wrong = problems(request) if isinstance(request, dict) else ["not a JSON object"]
            if wrong:
                self.record({"rejected": "; ".join(wrong)})
                return self.answer(422, "; ".join(wrong), "Invalid")
            self.record(request)
            data = json.dumps(request).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", options.port), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(options.cert, options.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print(f"listening on 127.0.0.1:{options.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
