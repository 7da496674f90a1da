# Image with both commands of the BRP ordered publication service:
#   publicatie            the publisher (default command)
#   publicatie migrate    apply the database schema and exit 0
#   mutatielevering       one consumer; run as many as you like
# Select one with the container command (compose.yaml does so per service).

FROM golang:1.26-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0
# Module downloads get their own layer, rebuilt only when go.mod/go.sum change. go.mod points
# go-stomp at the patched copy in third_party (third_party/go-stomp/README.md).
COPY go.mod go.sum* ./
COPY third_party ./third_party
RUN go mod download
COPY . .
# The release and commit for --version and brp_levering_build_info (.git is not in the context):
#   docker build --build-arg VERSION=1.4.0 --build-arg REVISION=$(git rev-parse HEAD) .
ARG VERSION=dev
ARG REVISION=unknown
RUN go build -trimpath -ldflags="-s -w -X github.com/brp/levering/cmd/internal/setup.version=${VERSION} -X github.com/brp/levering/cmd/internal/setup.revision=${REVISION}" \
    -o /out/ ./cmd/publicatie ./cmd/mutatielevering

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/publicatie /out/mutatielevering /usr/local/bin/
# Numeric (distroless's nonroot), so that Kubernetes' runAsNonRoot can check it.
USER 65532:65532
# /metrics, /healthz, /readyz (and the publisher's /status): no personal data. Inside a container
# the listener must take all interfaces. The operator pages (BRP_OPERATE_ADDR) stay off unless
# configured, and on all interfaces they need BRP_OPERATE_* authentication (README).
ENV BRP_HTTP_ADDR=0.0.0.0:9464
EXPOSE 9464
CMD ["publicatie"]
