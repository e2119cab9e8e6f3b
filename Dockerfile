# Pylon's container image: a static binary on a distroless base, run as a
# non-root user. Build from the repository's root:
#
#   docker build -t pylon .
#
# deploy/dockerfile_test.go checks this file: two stages, the builder's
# go build command (run on the tree), a non-root final stage, and every
# flag of the command against `pylon serve --help`.

# The builder: Go at least the version go.mod asks for.
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static (no cgo, so no libc to match), without the build machine's paths.
RUN CGO_ENABLED=0 go build -trimpath -ldflags=-s -o /out/pylon ./cmd/pylon
# The data folder, owned by the user the final stage runs as (nonroot,
# 65532): a fresh volume mounted there starts with this ownership.
RUN mkdir -p /out/data && chown 65532:65532 /out/data && chmod 0700 /out/data

# The final stage: no shell, no package manager; CA roots and tzdata only.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/pylon /usr/local/bin/pylon
COPY --from=build --chown=65532:65532 /out/data /var/lib/pylon
USER 65532:65532
# The embedded store and the admin tokens (bolt), or the tokens alone (etcd).
VOLUME ["/var/lib/pylon"]
ENV PYLON_DATA_DIR=/var/lib/pylon
# xDS, and the admin API (loopback only unless given TLS; see docs/packaging.md).
EXPOSE 18000
ENTRYPOINT ["/usr/local/bin/pylon", "serve"]
CMD ["--data-dir=/var/lib/pylon", "--xds-addr=:18000", "--admin-addr=127.0.0.1:19000"]
