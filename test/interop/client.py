"""A gRPC C-core xDS client (Debian's python3-grpcio), driven by the Go tests.

Usage: GRPC_XDS_BOOTSTRAP=bootstrap.json /usr/bin/python3 client.py xds:///target

Reads one JSON request per line on stdin:
    {"method": "/pkg.Svc/Method", "metadata": {"k": "v"}, "timeout": 5}
makes that unary RPC (empty request, wait for ready) and answers one JSON
line on stdout: {"ok": true, "response": "<hex>"} or {"ok": false,
"code": "UNAVAILABLE", "error": "..."}. Exits at the end of stdin. No
generated stubs: requests and responses are bytes. With
PYLON_INTEROP_XDS_CREDS=1 the channel has xDS credentials (TLS where a
cluster says so, gRFC A29; plaintext otherwise).
"""

import json
import os
import sys

import grpc
import grpc.experimental

# Lines are bounded so that a confused driver cannot make this read forever.
MAX_LINE = 64 << 10


def call(channel, req):
    rpc = channel.unary_unary(req["method"])  # no serializers: bytes in, bytes out
    try:
        resp = rpc(
            b"",
            timeout=float(req.get("timeout", 5)),
            metadata=tuple(req.get("metadata", {}).items()),
            wait_for_ready=True,
        )
        return {"ok": True, "response": resp.hex()}
    except grpc.RpcError as e:
        return {"ok": False, "code": e.code().name, "error": e.details()}


def main():
    target = sys.argv[1]
    if os.environ.get("PYLON_INTEROP_XDS_CREDS") == "1":
        creds = grpc.xds_channel_credentials(grpc.experimental.insecure_channel_credentials())
        channel = grpc.secure_channel(target, creds)
    else:
        channel = grpc.insecure_channel(target)
    with channel:
        while True:
            line = sys.stdin.readline(MAX_LINE)
            if not line:
                return
            print(json.dumps(call(channel, json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
