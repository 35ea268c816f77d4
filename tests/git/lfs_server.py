#!/usr/bin/python3
"""A minimal Git LFS server (batch API, basic transfer) run as a CGI script by fcgiwrap behind nginx.

Objects are read from <repo>/lfs/objects, git-lfs's layout for bare repositories. nginx passes
REPOS (the repositories' root), LFS_REPO (/name.git), LFS_PATH (the path after info/lfs) and
LFS_BASE (this endpoint's URL). An object with a file <oid>.corrupt beside it is served corrupted; one with
<oid>.noaction is listed without a download action; a missing object gets the batch API's error 404.
"""
import json
import os
import sys

repo_dir = os.path.join(os.environ["REPOS"], os.environ["LFS_REPO"].strip("/"))
path = os.environ["LFS_PATH"]
base = os.environ["LFS_BASE"]


def object_file(oid):
    return os.path.join(repo_dir, "lfs", "objects", oid[:2], oid[2:4], oid)


def reply(status, content_type, body):
    head = f"Status: {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    sys.stdout.buffer.write(head.encode() + body)


if path == "/objects/batch" and os.environ.get("REQUEST_METHOD") == "POST":
    request = json.loads(sys.stdin.buffer.read(int(os.environ.get("CONTENT_LENGTH") or 0)))
    objects = []
    for item in request["objects"]:
        entry = {"oid": item["oid"], "size": item["size"]}
        if os.path.exists(object_file(item["oid"]) + ".noaction"):
            entry["actions"] = {}
        elif os.path.exists(object_file(item["oid"])):
            entry["authenticated"] = True
            entry["actions"] = {"download": {"href": f"{base}/download/{item['oid']}"}}
        else:
            entry["error"] = {"code": 404, "message": "Object does not exist"}
        objects.append(entry)
    reply("200 OK", "application/vnd.git-lfs+json", json.dumps({"transfer": "basic", "objects": objects}).encode())
elif path.startswith("/download/") and os.path.exists(object_file(path[len("/download/"):])):
    with open(object_file(path[len("/download/"):]), "rb") as f:
        data = f.read()
    if os.path.exists(object_file(path[len("/download/"):]) + ".corrupt"):
        data = data[:-1] + bytes([data[-1] ^ 1])
    reply("200 OK", "application/octet-stream", data)
else:
    reply("404 Not Found", "text/plain", b"not found\n")
