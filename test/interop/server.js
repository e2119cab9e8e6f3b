// A grpc-js xDS-enabled server (@grpc/grpc-js-xds's XdsServer), driven by
// the Go tests.
//
// Usage: GRPC_XDS_BOOTSTRAP=bootstrap.json node server.js NAME 127.0.0.1:PORT
//
// Serves every unary method on the address with xDS server credentials
// (plaintext where its Listener sets no TLS), answering with NAME as a
// google.protobuf.StringValue, until stdin ends. It serves RPCs only once
// Pylon has sent the Listener for its address (gRFC A36).
'use strict';

const grpc = require('@grpc/grpc-js');
const xds = require('@grpc/grpc-js-xds');

xds.register();

const [name, address] = process.argv.slice(2);
// google.protobuf.StringValue: field 1, length-delimited; no stubs.
const answer = Buffer.concat([Buffer.from([0x0a, Buffer.byteLength(name)]), Buffer.from(name)]);
const identity = (x) => x;

const server = new xds.XdsServer();
// grpc-js has no handler for unknown methods: the tests call these.
for (const method of ['/pylon.interop.Greeter/SayHello', '/pylon.interop.Admin/Reset']) {
  server.register(method, (call, callback) => callback(null, answer), identity, identity, 'unary');
}
server.bindAsync(address, new xds.XdsServerCredentials(grpc.ServerCredentials.createInsecure()), (err) => {
  if (err) {
    process.stderr.write(`server.js: ${err}\n`);
    process.exit(1);
  }
});
process.stdin.on('data', () => {});
process.stdin.on('end', () => {
  server.forceShutdown();
  process.exit(0);
});
