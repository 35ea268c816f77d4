#!/usr/bin/env python3
"""Helpers of scripts/fault-suite (Debian's python3; python3-torch for compare-models).

  free-port                              a free TCP port on 127.0.0.1
  compare-models A.pt B.pt               max abs difference of the parameters and buffers of two TorchScript
                                         models (torch.jit.load); prints the figure, exit 1 if names/shapes differ
  check-cache SOURCE_DIR CACHE_DIR [--complete] [--no-temp]
                                         every data file in CACHE_DIR (trainpoint's own .trainpoint-s3* and .trainpoint.lock files and
                                         .NAME.tmp-* temporaries set apart) must equal the file of the same path in
                                         SOURCE_DIR by SHA-256; --complete: every source file must be there;
                                         --no-temp: no temporary may be left. Prints counts, exit 1 on a mismatch.
  cut-proxy LISTEN_PORT UPSTREAM_PORT CUT_BYTES LOG
                                         a TCP proxy for the git server: the first connection that has carried
                                         CUT_BYTES from the server is cut (both sides closed) and from then on
                                         the proxy stops listening: the server is gone mid-fetch.
  git-http PORT ROOT USER PASSWORD       git's smart HTTP (git http-backend as CGI) for the repositories under ROOT,
                                         answering 401 unless Basic auth gives USER and PASSWORD
  grep-secrets FILE_OF_SECRETS PATH...   count each secret (bytes) in every file under PATHs; prints hits
  assume-role ENDPOINT [SECONDS]         temporary credentials from the server's STS (AssumeRole, valid SECONDS,
                                         default 3600) for the user whose key and secret are in the environment
                                         (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY: no secret in an argument):
                                         key, secret and token on one line (scripts/fault-suite,
                                         scripts/expired-token-check)
"""
import hashlib
import os
import socket
import sys
import threading


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])


def compare_models(a, b):
    import torch

    ma, mb = torch.jit.load(a), torch.jit.load(b)
    ta = dict(list(ma.named_parameters()) + list(ma.named_buffers()))
    tb = dict(list(mb.named_parameters()) + list(mb.named_buffers()))
    if ta.keys() != tb.keys():
        print(f"different tensors: {sorted(ta.keys() ^ tb.keys())}")
        sys.exit(1)
    worst = 0.0
    for name, value in ta.items():
        if value.shape != tb[name].shape:
            print(f"{name}: shape {tuple(value.shape)} vs {tuple(tb[name].shape)}")
            sys.exit(1)
        if value.numel():
            worst = max(worst, (value.double() - tb[name].double()).abs().max().item())
    print(f"{worst:.3g} over {len(ta)} tensors")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def is_own(name):
    """trainpoint's own files: the S3 cache's journal and lock, an output directory's lock."""
    return name.startswith(".trainpoint-s3") or name == ".trainpoint.lock"


def check_cache(source, cache, complete, no_temp):
    good = bad = temps = own = 0
    seen = set()
    for root, _, files in os.walk(cache):
        for name in files:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, cache)
            if is_own(name):
                own += 1
                continue
            if name.startswith(".") and ".tmp-" in name:
                temps += 1
                continue
            src = os.path.join(source, rel)
            if not os.path.isfile(src):
                print(f"not in the source: {rel}")
                bad += 1
            elif sha256(src) != sha256(path):
                print(f"differs from the source: {rel} ({os.path.getsize(path)} vs {os.path.getsize(src)} bytes)")
                bad += 1
            else:
                good += 1
                seen.add(rel)
    missing = 0
    if complete:
        for root, _, files in os.walk(source):
            for name in files:
                rel = os.path.relpath(os.path.join(root, name), source)
                if rel not in seen and not is_own(name):
                    missing += 1
    print(f"{good} files equal the source, {bad} differ, {missing} missing, {temps} temporaries, {own} own files")
    if bad or (complete and missing) or (no_temp and temps):
        sys.exit(1)


def cut_proxy(listen_port, upstream_port, cut_bytes, log_path):
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", listen_port))
    listener.listen(16)
    cut = threading.Event()
    listener_lock = threading.Lock()

    def close_listener():
        with listener_lock:
            if listener.fileno() != -1:
                try:
                    listener.shutdown(socket.SHUT_RDWR)  # Linux: stops listening at once, wakes accept()
                except OSError:
                    pass
                listener.close()

    def log(text):
        with open(log_path, "a") as f:
            f.write(text + "\n")

    def pump(src, dst, counted):
        total = 0
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if counted:
                    total += len(data)
                    if total >= cut_bytes and not cut.is_set():
                        dst.sendall(data[: max(0, len(data) - (total - cut_bytes))])
                        cut.set()
                        close_listener()  # from now on connections are refused, as with a server that is gone
                        log(f"cut after {cut_bytes} bytes from the server; the server is gone")
                        break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    listener.settimeout(0.2)
    while not cut.is_set():
        try:
            client, _ = listener.accept()
        except socket.timeout:
            continue
        except OSError:  # closed by the cut
            break
        if cut.is_set():  # accepted in the instant of the cut: the server is gone for this one too
            client.close()
            break
        log("connection")
        server = socket.create_connection(("127.0.0.1", upstream_port))
        threading.Thread(target=pump, args=(client, server, False), daemon=True).start()
        threading.Thread(target=pump, args=(server, client, True), daemon=True).start()
    close_listener()
    log("stopped listening")
    threading.Event().wait()  # stay alive (refusing connections) until killed


def git_http(port, root, user, password):
    import base64
    import http.server
    import subprocess

    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def read_body(self):
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                body = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        self.rfile.readline()
                        return body
                    body += self.rfile.read(size)
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))

        def answer(self, status, headers, body):
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def handle_any(self):
            body = self.read_body()
            if self.headers.get("Authorization") != expected:
                self.answer(401, [("WWW-Authenticate", 'Basic realm="git"')], b"authentication required\n")
                return
            path, _, query = self.path.partition("?")
            env = dict(os.environ, GIT_PROJECT_ROOT=root, GIT_HTTP_EXPORT_ALL="1", PATH_INFO=path,
                       QUERY_STRING=query, REQUEST_METHOD=self.command, REMOTE_USER=user, REMOTE_ADDR="127.0.0.1",
                       CONTENT_TYPE=self.headers.get("Content-Type", ""), CONTENT_LENGTH=str(len(body)))
            if self.headers.get("Content-Encoding"):
                env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
            if self.headers.get("Git-Protocol"):
                env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
            out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
            head, _, payload = out.partition(b"\r\n\r\n")
            status, headers = 200, []
            for line in head.decode().split("\r\n"):
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.split()[0])
                elif name:
                    headers.append((name, value.strip()))
            self.answer(status, headers, payload)

        do_GET = do_POST = handle_any

    http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def grep_secrets(secrets_file, paths):
    secrets = [line.strip().encode() for line in open(secrets_file) if line.strip()]
    hits = 0
    files = 0
    for top in paths:
        walk = [(os.path.dirname(top), [], [os.path.basename(top)])] if os.path.isfile(top) else os.walk(top)
        for root, _, names in walk:
            for name in names:
                path = os.path.join(root, name)
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                files += 1
                try:
                    data = open(path, "rb").read()
                except OSError:
                    continue
                for secret in secrets:
                    n = data.count(secret)
                    if n:
                        hits += n
                        print(f"LEAK: {path}: {n} x {secret[:6].decode()}...")
    print(f"{hits} occurrences of {len(secrets)} secrets in {files} files")
    sys.exit(1 if hits else 0)


def assume_role(endpoint, duration_seconds="3600"):
    """Temporary credentials from the S3 server's STS (MinIO's AssumeRole) for the user whose keys are in
    AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: key, secret, token on one line."""
    import botocore.session

    sts = botocore.session.get_session().create_client(
        "sts", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"])
    answer = sts.assume_role(RoleArn="arn:aws:iam::000000000000:role/fault", RoleSessionName="fault",
                             DurationSeconds=int(duration_seconds))["Credentials"]
    print(answer["AccessKeyId"], answer["SecretAccessKey"], answer["SessionToken"])


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "free-port":
        free_port()
    elif command == "compare-models":
        compare_models(*args)
    elif command == "check-cache":
        flags = [a for a in args if a.startswith("--")]
        rest = [a for a in args if not a.startswith("--")]
        check_cache(rest[0], rest[1], "--complete" in flags, "--no-temp" in flags)
    elif command == "cut-proxy":
        cut_proxy(int(args[0]), int(args[1]), int(args[2]), args[3])
    elif command == "git-http":
        git_http(int(args[0]), *args[1:])
    elif command == "assume-role":
        assume_role(*args)
    elif command == "grep-secrets":
        grep_secrets(args[0], args[1:])
    else:
        sys.exit(f"unknown command {command}")
