#!/usr/bin/env bash
# dragate's container image, built without Docker or a base image (see image/build.py).
#
#   image/build.sh                        build, or reuse the build for these inputs
#   image/build.sh --check-reproducible   same; a cold build is done twice (two download
#                                         caches) and fails unless both digests are equal
#   image/build.sh --print-dir | lock     the cache dir for these inputs | refresh the locks
#
# The last stdout line is the image dir: oci/ (OCI layout), rootfs/, image.json. Needs root.
# Installs the Debian tools it and tests/image use (dpkg-deb, chroot, unshare, nsenter, ip,
# umoci) when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

ensure_tools() {
    local missing=()
    command -v dpkg-deb >/dev/null || missing+=(dpkg)
    command -v chroot >/dev/null || missing+=(coreutils)
    command -v nsenter >/dev/null || missing+=(util-linux)
    command -v ip >/dev/null || missing+=(iproute2)
    command -v umoci >/dev/null || missing+=(umoci)  # tests/image: an independent OCI reader
    command -v apt-get >/dev/null || return 0
    if ((${#missing[@]})); then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
    fi
}

case "${1:-}" in
    --print-dir) exec python3 image/build.py print-dir ;;
    lock) exec python3 image/build.py lock ;;
    --check-reproducible)
        ensure_tools
        dir=$(python3 image/build.py print-dir)
        if [[ -e "$dir/image.json" ]]; then
            echo "$dir"
            exit 0
        fi
        dir=$(python3 image/build.py build | tail -n 1)
        again=$(mktemp -d)
        trap 'rm -rf "$again"' EXIT
        second=$(DRAGATE_IMAGE_DIR="$again" python3 image/build.py build | tail -n 1)
        first_digest=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["digest"])' "$dir/image.json")
        second_digest=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["digest"])' "$second/image.json")
        if [[ "$first_digest" != "$second_digest" ]]; then
            echo "image/build.sh: not reproducible: $first_digest != $second_digest" >&2
            mv "$dir" "$dir.unreproducible"
            exit 1
        fi
        echo "reproducible: two cold builds gave $first_digest" >&2
        echo "$dir"
        ;;
    "")
        ensure_tools
        python3 image/build.py build
        ;;
    *) sed -n '2,10p' "$0" >&2; exit 2 ;;
esac
