"""A gRPC C-core xDS-enabled server (Debian's python3-grpcio), driven by the
Go tests.

Usage: GRPC_XDS_BOOTSTRAP=bootstrap.json /usr/bin/python3 server.py NAME 127.0.0.1:PORT

Serves every unary method on the address with xDS server credentials
(plaintext where its Listener sets no TLS), answering with NAME as a
google.protobuf.StringValue, until stdin ends. It serves RPCs only once
Pylon has sent the Listener for its address (gRFC A36).
"""

import sys
from concurrent import futures

import grpc


def string_value(s):
    # google.protobuf.StringValue: field 1, length-delimited; no stubs.
    b = s.encode()
    return bytes([0x0A, len(b)]) + b


class Handler(grpc.GenericRpcHandler):
    def __init__(self, name):
        self.answer = string_value(name)

    def service(self, details):
        return grpc.unary_unary_rpc_method_handler(lambda req, ctx: self.answer)


def main():
    name, address = sys.argv[1], sys.argv[2]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), xds=True)
    server.add_generic_rpc_handlers((Handler(name),))
    server.add_secure_port(address, grpc.xds_server_credentials(grpc.insecure_server_credentials()))
    server.start()
    # Bounded: a stdin that never ends is the driver's bug, not a reason to
    # serve forever; the driver kills the process at the end of the test.
    sys.stdin.read(1 << 10)
    server.stop(0)


if __name__ == "__main__":
    main()
