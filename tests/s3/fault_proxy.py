#!/usr/bin/env python3
"""An HTTP proxy for the S3 tests that injects faults in front of the test S3 server (MinIO).

usage: fault_proxy.py LISTEN_PORT UPSTREAM_PORT RULES_JSON REQUEST_LOG

RULES_JSON is a list of {"method": "GET", "path_contains": "key", "fault": F, "times": N}; a request
matching a rule with times left gets fault F instead of (or on top of) the upstream answer:
  503, slowdown (503 SlowDown), 429   an error answer
  reset      status, headers and half the body, then a TCP reset
  truncate   status, headers (full Content-Length) and half the body, then a clean close
  stall      status, headers and half the body, then silence
  corrupt    the whole body with one byte flipped
  corrupt_request  the request's body sent upstream with one byte flipped (an upload damaged on its way)
  bad_checksum  the upstream answer with every x-amz-checksum-* value it sent made wrong (a wrong
             x-amz-checksum-crc32 header added when it sent none)
"times": -1 means every time. An optional "probability" (0..1) applies the rule to only that share of
the matching requests (random, seeded by FAULT_PROXY_SEED when set): scripts/fault-suite's 30% fault rate.
An optional "max_in_a_row" caps the faults one path may get in a row (from any rule) before that rule lets
it through; an honest answer resets the path's count. A client's retries are bounded; a random rate alone gives
some object of thousands more faults in a row than any bounded retry policy outlasts.
Each request is logged as "METHOD PATH RANGE FAULT".
"""
import http.client
import http.server
import json
import os
import random
import socket
import struct
import sys
import threading
import time

listen_port, upstream_port = int(sys.argv[1]), int(sys.argv[2])
with open(sys.argv[3]) as rules_file:
    rules = json.load(rules_file)
log_path = sys.argv[4]
lock = threading.Lock()
chance = random.Random(os.environ.get("FAULT_PROXY_SEED"))
faults_in_a_row = {}  # object path -> faults its requests got in a row, from any rule


def take_fault(method, path):
    key = path.split("?")[0]  # the object, whatever the query (a part, a range)
    with lock:
        for rule in rules:
            if rule.get("method", method) == method and rule.get("path_contains", "") in path and rule["times"] != 0:
                if faults_in_a_row.get(key, 0) >= rule.get("max_in_a_row", float("inf")):
                    continue
                if "probability" in rule and chance.random() >= rule["probability"]:
                    continue
                rule["times"] -= 1
                faults_in_a_row[key] = faults_in_a_row.get(key, 0) + 1
                return rule["fault"]
        faults_in_a_row[key] = 0
    return None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle_any(self):
        length = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(length) if length else b""
        fault = take_fault(self.command, self.path)
        with lock, open(log_path, "a") as log:
            log.write(f"{self.command} {self.path} {self.headers.get('Range', '-')} {fault or '-'}\n")
        if fault in ("503", "slowdown", "429"):
            code = {"503": "ServiceUnavailable", "slowdown": "SlowDown", "429": "TooManyRequests"}[fault]
            payload = f"<Error><Code>{code}</Code><Message>injected</Message></Error>".encode()
            self.send_response(429 if fault == "429" else 503)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
        if fault == "corrupt_request" and body:
            body = bytes([body[0] ^ 0xFF]) + body[1:]
        upstream.request(self.command, self.path, body=body, headers=headers)
        response = upstream.getresponse()
        data = response.read()
        upstream.close()
        if fault == "corrupt" and data:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        self.send_response(response.status)
        checksums = 0
        for name, value in response.getheaders():
            if name.lower() in ("connection", "transfer-encoding", "keep-alive", "date", "server"):
                continue
            if fault == "bad_checksum" and name.lower().startswith("x-amz-checksum-") and name.lower() != "x-amz-checksum-type":
                value = ("B" if value[0] == "A" else "A") + value[1:]  # same length, another value
                checksums += 1
            self.send_header(name, value)
        if fault == "bad_checksum" and checksums == 0:
            self.send_header("x-amz-checksum-crc32", "AAAAAA==")
        self.end_headers()
        if self.command == "HEAD":
            return
        if fault in ("reset", "truncate", "stall"):
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            if fault == "stall":
                time.sleep(30)
            if fault == "reset":
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            return
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any


server = http.server.ThreadingHTTPServer(("127.0.0.1", listen_port), Handler)
server.daemon_threads = True
server.serve_forever()
