#!/usr/bin/env python3
"""Signs requests with botocore's S3SigV4Auth, the independent oracle for tests/s3/sigv4_test.cpp.

Reads a JSON list of requests on stdin: {method, scheme, host, key (raw object key), params [[name, value]],
headers [[name, value]], payload_sha256, access_key, secret_key, token, region, timestamp}.
Prints a JSON list of {canonical_request, authorization}. The URL path is encoded here with Python's own
quote(), so the C++ encoder is checked too. The clock is not read: the timestamp is given.
"""
import json
import sys
from urllib.parse import quote

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

results = []
for spec in json.load(sys.stdin):
    url = f"{spec['scheme']}://{spec['host']}{quote(spec['path'], safe='/~')}"
    request = AWSRequest(method=spec["method"], url=url, headers=dict(spec["headers"]), params=dict(spec["params"]))
    request.context["timestamp"] = spec["timestamp"]
    request.headers["X-Amz-Date"] = spec["timestamp"]
    if spec["token"]:
        request.headers["X-Amz-Security-Token"] = spec["token"]
    request.headers["X-Amz-Content-SHA256"] = spec["payload_sha256"]
    auth = S3SigV4Auth(Credentials(spec["access_key"], spec["secret_key"], spec["token"] or None), "s3", spec["region"])
    canonical = auth.canonical_request(request)
    signature = auth.signature(auth.string_to_sign(request, canonical), request)
    headers_to_sign = auth.headers_to_sign(request)
    authorization = (
        f"AWS4-HMAC-SHA256 Credential={auth.scope(request)},"
        f"SignedHeaders={auth.signed_headers(headers_to_sign)},Signature={signature}"
    )
    results.append({"canonical_request": canonical, "authorization": authorization})
json.dump(results, sys.stdout)
