# syntax=docker/dockerfile:1
# Multi-stage build of the compactor: a static binary (CGO off; SQLite is
# pure Go) on a minimal non-root runtime image.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# The build identity shown by `compactor version`, compactor_build_info and
# the page footer. Without .git in the context the toolchain cannot stamp it:
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg REVISION=$(git rev-parse HEAD) \
#     --build-arg BUILD_TIME=$(date -u +%Y-%m-%dT%H:%M:%SZ) .
ARG VERSION=""
ARG REVISION=""
ARG BUILD_TIME=""
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags="-s -w \
        -X github.com/compactorhq/compactor/internal/buildinfo.version=${VERSION} \
        -X github.com/compactorhq/compactor/internal/buildinfo.revision=${REVISION} \
        -X github.com/compactorhq/compactor/internal/buildinfo.buildTime=${BUILD_TIME}" \
      -o /out/compactor ./cmd/compactor \
    && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/compactor /usr/local/bin/compactor
# The embedded catalog (SQLite) and blob store live here, owned by nonroot.
COPY --from=build --chown=65532:65532 /out/data /data
VOLUME ["/data"]
EXPOSE 7070
USER nonroot:nonroot
ENV COMPACTOR_DATA_DIR=/data \
    COMPACTOR_LISTEN=0.0.0.0:7070 \
    COMPACTOR_ADDR=http://127.0.0.1:7070
# No shell in the image: the binary checks its own readiness.
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/compactor", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/compactor"]
CMD ["serve"]
