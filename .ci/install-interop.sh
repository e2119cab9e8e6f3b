#!/usr/bin/env bash
# Installs the gRPC xDS clients that test/interop runs against Pylon besides
# grpc-go: gRPC C-core through Debian's python3-grpcio, and grpc-js with
# @grpc/grpc-js-xds from npm at the versions pinned in
# test/interop/package-lock.json. Quiet and idempotent: it installs only what
# is missing. Needs root (apt) and the Debian and npm registries.
set -euo pipefail
cd "$(dirname "$0")/.."

# The tests run /usr/bin/python3, Debian's, which sees Debian's packages (a
# pyenv or venv python3 on PATH would not).
if ! /usr/bin/python3 -c 'import grpc' >/dev/null 2>&1; then
  echo "install-interop: installing python3-grpcio (gRPC C-core)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends python3 python3-grpcio >/dev/null
fi

if [ ! -x /usr/bin/node ] && ! command -v node >/dev/null 2>&1; then
  echo "install-interop: installing Debian's nodejs and npm" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

# npm ci installs exactly the lock file; no install scripts run (none of these
# packages needs one).
if [ ! -d test/interop/node_modules/@grpc/grpc-js-xds ]; then
  echo "install-interop: npm ci in test/interop (grpc-js, grpc-js-xds)" >&2
  (cd test/interop && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
fi
