#!/usr/bin/env bash
# Build the CEL oracle (Kubernetes 1.34's CEL environments, see main.go) from the Go module
# proxy into a cache directory outside the repository:
#   ${DRAGATE_CELORACLE_DIR:-$HOME/.cache/dragate/celoracle}/<pin-hash>/celoracle
# plus sources.json there: the module-cache directories of the pinned modules, where the
# differential tests read the upstream test tables. <pin-hash> covers go.mod, go.sum, the Go
# sources and this script, so a changed pin builds afresh and an unchanged one is a no-op.
#
# Usage: build.sh   build if missing; the last stdout line is the oracle binary's path.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pin_hash="$(cat "$here/go.mod" "$here/go.sum" "$here"/*.go "$here/build.sh" | sha256sum | cut -c1-16)"
root="${DRAGATE_CELORACLE_DIR:-$HOME/.cache/dragate/celoracle}"
pin_dir="$root/$pin_hash"
binary="$pin_dir/celoracle"

log() { echo "[celoracle $(date +%H:%M:%S)] $*" >&2; }

mkdir -p "$pin_dir"
if command -v flock >/dev/null; then
  exec 9>"$pin_dir/.lock"
  flock 9
fi
if [[ ! -x "$binary" || ! -s "$pin_dir/sources.json" ]]; then
  log "building into $pin_dir ($(go version))"
  started=$SECONDS
  cd "$here"
  CGO_ENABLED=0 GOFLAGS=-mod=readonly nice -n 10 go build -trimpath -o "$binary.tmp" .
  go list -m -json github.com/google/cel-go k8s.io/apiserver k8s.io/dynamic-resource-allocation \
    > "$pin_dir/sources.json.tmp"
  # apiextensions' CRD validation tables: the release that matches the pinned apiserver.
  go mod download -json "k8s.io/apiextensions-apiserver@$(go list -m -f '{{.Version}}' k8s.io/apiserver)" \
    >> "$pin_dir/sources.json.tmp"
  mv -f "$pin_dir/sources.json.tmp" "$pin_dir/sources.json"
  mv -f "$binary.tmp" "$binary"
  log "built in $((SECONDS - started))s"
fi
echo "$binary"
