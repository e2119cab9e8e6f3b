#!/usr/bin/env bash
# Builds the real kube-apiserver that internal/source/kube's tests start, once,
# into a cache folder that later runs (and CI on the same machine) reuse:
#   ${PYLON_CACHE:-$HOME/.cache/pylon}/kube-apiserver-v1.37.2/kube-apiserver
# It does nothing when the binary is already there.
#
# k8s.io/kubernetes is built from the Go module proxy in a throwaway module,
# outside Pylon's go.mod (the apiserver's dependencies never enter Pylon's
# build): k8s.io/kubernetes's own go.mod replaces its staging modules
# (k8s.io/api, k8s.io/apiserver, ...) with folders of its repository, which a
# module download does not have, so the generated go.mod replaces each of
# them with the release of the same minor version (v1.37.2 -> v0.37.2). The
# list is read from that go.mod, so it follows the version.
#
# The first build takes about 11 minutes on a 2-core machine.
set -euo pipefail

version=v1.37.2
staging="v0.${version#v1.}"
dest="${PYLON_CACHE:-${HOME:-/root}/.cache/pylon}/kube-apiserver-$version"
bin="$dest/kube-apiserver"

if [ -x "$bin" ]; then
  echo "kube-apiserver $version: cached at $bin"
  exit 0
fi

export PATH="/usr/local/go/bin:$PATH"
export GOFLAGS=-mod=mod GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

echo "kube-apiserver $version: building into $dest (about 11 minutes the first time)"
go mod init pylon.invalid/kube-apiserver-build >/dev/null 2>&1
gomod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
if [ ! -f "$gomod" ]; then
  echo "kube-apiserver: could not download k8s.io/kubernetes@$version's go.mod" >&2
  exit 1
fi
{
  echo "require k8s.io/kubernetes $version"
  echo "replace ("
  sed -n "s#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\) => \./staging/src/.*#\t\1 => \1 $staging#p" "$gomod"
  echo ")"
} >>go.mod
if ! grep -q "k8s.io/apiserver => k8s.io/apiserver $staging" go.mod; then
  echo "kube-apiserver: found no staging replacements in $gomod" >&2
  exit 1
fi

go get "k8s.io/kubernetes/cmd/kube-apiserver@$version"
mkdir -p "$dest"
# Built beside the final name and renamed, so an interrupted build never
# leaves a binary that looks cached.
go build -trimpath -o "$bin.partial" \
  -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$version" \
  k8s.io/kubernetes/cmd/kube-apiserver
mv "$bin.partial" "$bin"
echo "kube-apiserver $version: built at $bin"
