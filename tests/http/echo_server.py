#!/usr/bin/env python3
"""The server behind tests/http's fault proxy (tests/s3/fault_proxy.py), on loopback.

usage: echo_server.py PORT
  GET /blob/N            N bytes, byte i being i % 251
  PUT or POST /echo      the request body back, with x-seen-method, x-seen-authorization and
                         x-seen-accept naming what came (empty when absent)
  any /redirect/PATH     307 to /PATH (relative, so the client comes back through the proxy)
  anything else          404 with a short text body
"""
import http.server
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_any(self):
        length = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(length) if length else b""
        if self.path.startswith("/redirect/"):
            self.answer(307, b"", [("Location", self.path[len("/redirect"):])])
        elif self.path.startswith("/blob/") and self.command == "GET":
            size = int(self.path[len("/blob/"):])
            self.answer(200, bytes(i % 251 for i in range(size)), [("Content-Type", "application/octet-stream")])
        elif self.path == "/echo" and self.command in ("PUT", "POST"):
            self.answer(200, body, [("X-Seen-Method", self.command),
                                    ("X-Seen-Authorization", self.headers.get("Authorization", "")),
                                    ("X-Seen-Accept", self.headers.get("Accept", ""))])
        else:
            self.answer(404, b"no such thing\n")

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any


server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
server.daemon_threads = True
server.serve_forever()
