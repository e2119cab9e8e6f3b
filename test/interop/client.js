// A grpc-js xDS client (@grpc/grpc-js with @grpc/grpc-js-xds), driven by the
// Go tests.
//
// Usage: GRPC_XDS_BOOTSTRAP=bootstrap.json node client.js xds:///target
//
// Reads one JSON request per line on stdin:
//   {"method": "/pkg.Svc/Method", "metadata": {"k": "v"}, "timeout": 5}
// makes that unary RPC (empty request, wait for ready) and answers one JSON
// line on stdout: {"ok": true, "response": "<hex>"} or {"ok": false,
// "code": "UNAVAILABLE", "error": "..."}. Exits at the end of stdin. No
// generated stubs: requests and responses are Buffers. With
// PYLON_INTEROP_XDS_CREDS=1 the channel has xDS credentials (TLS where a
// cluster says so, gRFC A29; plaintext otherwise).
'use strict';

const readline = require('node:readline');
const grpc = require('@grpc/grpc-js');
const xds = require('@grpc/grpc-js-xds');

xds.register();

const creds = process.env.PYLON_INTEROP_XDS_CREDS === '1'
  ? new xds.XdsChannelCredentials(grpc.credentials.createInsecure())
  : grpc.credentials.createInsecure();
const client = new grpc.Client(process.argv[2], creds);
const identity = (x) => x;

function unary(req, waitForReady, timeout) {
  return new Promise((resolve) => {
    const md = new grpc.Metadata({ waitForReady });
    for (const [k, v] of Object.entries(req.metadata || {})) {
      md.set(k, v);
    }
    const deadline = Date.now() + 1000 * timeout;
    client.makeUnaryRequest(req.method, identity, identity, Buffer.alloc(0), md, { deadline }, (err, resp) => {
      if (err) {
        resolve({ ok: false, code: grpc.status[err.code], error: err.details });
      } else {
        resolve({ ok: true, response: resp.toString('hex') });
      }
    });
  });
}

async function call(req) {
  const got = await unary(req, true, req.timeout || 5);
  if (got.ok || got.code !== 'DEADLINE_EXCEEDED') {
    return got;
  }
  // Waiting for ready hides why the channel is not: an RPC that does not
  // wait fails with the resolver's or balancer's error (a refused
  // bootstrap, a NACKed resource), which is what a reader needs.
  const probe = await unary(req, false, 1);
  got.error += ` (an RPC without wait-for-ready: ${probe.ok ? 'succeeded' : probe.code + ': ' + probe.error})`;
  return got;
}

async function main() {
  // One request at a time, in order: the driver waits for each answer.
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    process.stdout.write(JSON.stringify(await call(JSON.parse(line))) + '\n');
  }
  client.close();
  // The xDS client keeps its stream to the control plane open: leave now.
  process.exit(0);
}

main().catch((err) => {
  process.stderr.write(`client.js: ${err.stack || err}\n`);
  process.exit(1);
});
