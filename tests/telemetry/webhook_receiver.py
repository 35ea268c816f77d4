#!/usr/bin/env python3
"""A webhook for tests, as Slack's incoming webhooks, Teams' workflow webhooks and other JSON receivers take
them: POST of a JSON body to a secret path on loopback. The first --fail-first requests are answered 503 (a
server that is briefly down); then each body on --path is checked for its --format and appended to --log as one
JSON line, {"body": ...}, or {"rejected": reason} when it is not what that format takes (answered 400).

    webhook_receiver.py --port N --path /services/T0/B0/SECRET --format json|slack|teams --log FILE [--fail-first K]
"""
import argparse
import http.server
import json
import sys


def problems(body, format):
    """What the body lacks for the format, as a list of reasons."""
    if format == "slack":
        return [] if isinstance(body.get("text"), str) and body["text"] else ["no text"]
    if format == "teams":
        attachments = body.get("attachments") if body.get("type") == "message" else None
        if not isinstance(attachments, list) or len(attachments) != 1:
            return ["not a message with one attachment"]
        card = attachments[0]
        if card.get("contentType") != "application/vnd.microsoft.card.adaptive":
            return ["the attachment is not an Adaptive Card"]
        content = card.get("content", {})
        if content.get("type") != "AdaptiveCard" or not content.get("body"):
            return ["the card has no body"]
        return []
    return [] if body.get("event") in ("finished", "failed", "stalled") and body.get("job") else ["no event or job"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--format", choices=["json", "slack", "teams"], required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--fail-first", type=int, default=0)
    args = parser.parse_args()
    seen = {"requests": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        def answer(self, status, text):
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def record(self, entry):
            with open(args.log, "a") as log:
                log.write(json.dumps(entry) + "\n")

        def do_POST(self):
            seen["requests"] += 1
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            if seen["requests"] <= args.fail_first:
                return self.answer(503, "briefly down")
            if self.path != args.path:
                self.record({"rejected": "wrong path"})
                return self.answer(404, "no such hook")
            try:
                body = json.loads(raw)
            except ValueError:
                self.record({"rejected": "not JSON"})
                return self.answer(400, "invalid_payload")
            wrong = problems(body, args.format) if isinstance(body, dict) else ["not an object"]
            if wrong:
                self.record({"rejected": "; ".join(wrong)})
                return self.answer(400, "invalid_payload")
            self.record({"body": body})
            self.answer(200, "ok")

        def log_message(self, *_):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print("listening", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
