# syntax=docker/dockerfile:1
# The hmsproxy image: a static binary (no cgo, so no libc to match) on a
# distroless base that holds CA certificates and time zones and nothing to
# run a shell with, as the unprivileged user nonroot (65532).
#   make image    (docker build -t hmsproxy:<appVersion of deploy/helm/hmsproxy/Chart.yaml> .,
#                  the tag the chart pulls when image.tag is empty)
#   docker run -p 9083:9083 -p 9084:9084 hmsproxy:0.1.0 --upstream.uris thrift://hms:9083
# cmd/hmsproxy/deploy_test.go checks this file's properties.

ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# -buildvcs=false: the build context holds no .git (see .dockerignore).
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -buildvcs=false -ldflags="-s -w" \
      -o /out/hmsproxy ./cmd/hmsproxy

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/hmsproxy /usr/local/bin/hmsproxy
# The default config listens for clients and the admin port on every
# interface (outside a container the admin port defaults to loopback);
# the Helm chart mounts its own over /etc/hmsproxy.
COPY deploy/container/hmsproxy.yaml /etc/hmsproxy/hmsproxy.yaml
ENV HMSPROXY_CONFIG=/etc/hmsproxy/hmsproxy.yaml
USER 65532:65532
EXPOSE 9083 9084
ENTRYPOINT ["/usr/local/bin/hmsproxy"]
