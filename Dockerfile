# conductor-tf's image: the manager, the pinned OpenTofu, git (module sources are git URLs) and
# ssh, running as the non-root user conductor (65532) with a read-only root filesystem; runs work
# under /work (an emptyDir in the Deployment).
#
# With a registry:  docker build -t IMG .   (compiles the manager and OpenTofu in the builder stage;
#                   BASE_IMAGE defaults to debian:bookworm-slim)
# Offline:          make docker-build IMG=…  (builds both on the host into bin/image/, then builds
#                   the `prebuilt` stage on the base `make base-image` made with debootstrap;
#                   PROVIDER_MIRROR=true builds `prebuilt-mirror`, which bakes in the provider mirror)
ARG BASE_IMAGE=debian:bookworm-slim
ARG GO_IMAGE=golang:1.26-bookworm

# The runtime base: git, ca-certificates and openssh-client (already in the offline base), and the
# user conductor, so that Terraform's lock holder reads conductor@<hostname>.
FROM ${BASE_IMAGE} AS base
RUN set -eu; \
    if ! command -v git >/dev/null || ! command -v ssh >/dev/null || [ ! -e /etc/ssl/certs/ca-certificates.crt ]; then \
      apt-get update && apt-get install -y --no-install-recommends git ca-certificates openssh-client \
      && rm -rf /var/lib/apt/lists/*; \
    fi; \
    if ! getent passwd 65532 >/dev/null; then \
      echo 'conductor:x:65532:65532:conductor-tf:/work/home:/usr/sbin/nologin' >>/etc/passwd; \
      echo 'conductor:x:65532:' >>/etc/group; \
    fi; \
    mkdir -p /work && chown 65532:65532 /work
ENV HOME=/work/home

# Offline: binaries built on the host (make docker-build).
FROM base AS prebuilt
COPY bin/image/manager /usr/local/bin/manager
COPY bin/image/tofu /usr/local/bin/tofu
WORKDIR /work
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/manager"]

# Offline, for clusters without internet: provider plugins in a filesystem_mirror that every run
# installs from (TF_CLI_CONFIG_FILE); see the README for mounting a mirror instead.
FROM prebuilt AS prebuilt-mirror
COPY bin/image/providers/ /opt/conductor-tf/providers/
ENV TF_CLI_CONFIG_FILE=/opt/conductor-tf/providers/terraform.rc

# With a registry: compile the manager and the pinned OpenTofu from source.
FROM ${GO_IMAGE} AS builder
WORKDIR /workspace
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
COPY hack/tools.sh hack/tools.sh
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/manager ./cmd/conductor-tf
RUN CONDUCTOR_TF_CACHE=/cache hack/tools.sh tofu && cp /cache/tofu/*/bin/tofu /out/tofu

FROM base
COPY --from=builder /out/manager /usr/local/bin/manager
COPY --from=builder /out/tofu /usr/local/bin/tofu
WORKDIR /work
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/manager"]
