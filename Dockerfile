# pibot: one static binary plus the tools the agent's bash calls use.
#
#   docker build -t pibot \
#     --build-arg VERSION="$(git describe --tags --always --dirty)" \
#     --build-arg COMMIT="$(git rev-parse HEAD)" \
#     --build-arg DATE="$(TZ=UTC git show -s --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd)" .
#   docker run -d -p 8080:8080 -v pibot-data:/data -e OPENAI_API_KEY -e PIBOT_WEB_TOKEN pibot
#
# The configuration is /etc/pibot/config.yaml (deploy/docker/config.yaml: every
# setting from the environment); mount your own file there or point PIBOT_CONFIG
# at one. See README "Running in production".

ARG GO_VERSION=1.26
ARG ALPINE_VERSION=3.22

FROM golang:${GO_VERSION}-alpine AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
ARG COMMIT=""
ARG DATE=""
# Stamps left empty fall back to what the binary knows (see internal/buildinfo).
RUN pkg=github.com/pibot/pibot/internal/buildinfo && \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X $pkg.version=${VERSION} -X $pkg.commit=${COMMIT} -X $pkg.date=${DATE}" \
      -o /out/pibot ./cmd/pibot

FROM alpine:${ALPINE_VERSION}
# The agent's tools: bash runs every command, coreutils/git/ripgrep are what
# models reach for, bubblewrap sandboxes bash (when the container allows it),
# ca-certificates for HTTPS to model providers and chat platforms.
# Packages are not pinned: Alpine drops superseded versions from its mirrors,
# so the base image tag is the pin.
# hadolint ignore=DL3018
RUN apk add --no-cache bash coreutils git ripgrep bubblewrap ca-certificates && \
    addgroup -S -g 10001 pibot && \
    adduser -S -D -H -u 10001 -G pibot -h /data -s /sbin/nologin pibot && \
    mkdir -p /data/state /data/workspace && chown -R pibot:pibot /data && \
    chmod 0700 /data/state /data/workspace
COPY --from=build /out/pibot /usr/local/bin/pibot
COPY deploy/docker/config.yaml /etc/pibot/config.yaml
ENV PIBOT_CONFIG=/etc/pibot/config.yaml
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8080
# pibot probes its own listener (http.listen from the configuration): the
# image needs no curl or wget.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["pibot", "healthcheck"]
ENTRYPOINT ["pibot"]
CMD ["serve"]
