#!/usr/bin/env bash
# Build the CEL oracle (a Kubernetes minor's CEL environments, see main.go) from the Go module
# proxy into a cache directory outside the repository:
#   ${DRAGATE_CELORACLE_DIR:-$HOME/.cache/dragate/celoracle}/<minor>-<pin-hash>/celoracle
# plus sources.json there: the module-cache directories of the pinned modules, where the
# differential tests read the upstream test tables. The newest supported minor builds from
# go.mod beside this script; an older one from minors/<minor>/go.mod, the same Go sources
# compiled in a scratch copy. <pin-hash> covers that module file, its go.sum, the Go sources
# and this script, so a changed pin builds afresh and an unchanged one is a no-op.
#
# Usage: build.sh [MINOR]   build if missing (MINOR: 1.35, 1.36 or 1.37, the default);
#                           the last stdout line is the oracle binary's path.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
newest="1.37"
minor="${1:-$newest}"
if [[ "$minor" == "$newest" ]]; then
  module="$here"
elif [[ -f "$here/minors/$minor/go.mod" ]]; then
  module="$here/minors/$minor"
else
  echo "build.sh: no CEL oracle pin for Kubernetes $minor (have: $newest $(ls "$here/minors" | tr '\n' ' '))" >&2
  exit 2
fi
pin_hash="$(cat "$module/go.mod" "$module/go.sum" "$here"/*.go "$here/build.sh" | sha256sum | cut -c1-16)"
root="${DRAGATE_CELORACLE_DIR:-$HOME/.cache/dragate/celoracle}"
pin_dir="$root/$minor-$pin_hash"
binary="$pin_dir/celoracle"

log() { echo "[celoracle $minor $(date +%H:%M:%S)] $*" >&2; }

mkdir -p "$pin_dir"
if command -v flock >/dev/null; then
  exec 9>"$pin_dir/.lock"
  flock 9
fi
if [[ ! -x "$binary" || ! -s "$pin_dir/sources.json" ]]; then
  log "building into $pin_dir ($(go version))"
  started=$SECONDS
  work="$(mktemp -d "$pin_dir/.src.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  cp "$here"/*.go "$module/go.mod" "$module/go.sum" "$work/"
  cd "$work"
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
