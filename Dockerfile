# dragate's container image: `docker build -t <registry>/dragate:0.1.0 .`
#
# The same build as image/build.sh (which needs no Docker): the first stage runs
# image/build.py to make the root filesystem from the pinned Debian packages
# (image/debian.lock) and wheels (image/*requirements.lock), all verified by sha256; the
# second stage is that filesystem alone. No shell, no package manager run at runtime,
# uid 65532, everything precompiled, nothing written outside /tmp and /dev/shm (the chart's
# emptyDirs), so it runs with readOnlyRootFilesystem.

FROM debian:12-slim AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# The stage's own tools only; what goes into the image is pinned in image/*.lock.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates python3 python3-pip \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY image ./image
COPY webhook ./webhook
# chroot (the image's own Python installs and compiles) needs root: the build stage only.
RUN python3 image/build.py rootfs /rootfs

FROM scratch
COPY --from=build /rootfs/ /
ENV PATH=/opt/dragate/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    XDG_STATE_HOME=/tmp/state
LABEL org.opencontainers.image.title="dragate" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.source="https://github.com/dragate/dragate" \
      org.opencontainers.image.licenses="Apache-2.0"
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/opt/dragate/bin/dragate"]
CMD ["serve"]
