#!/usr/bin/env bash
# Build the real-Kubernetes e2e toolchain from the Go module proxy:
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
#                                                     (toolchain/kube, Kubernetes v1.34.x)
#   etcd                                              (toolchain/etcd, etcd server v3.6.x)
#   helm                                              (toolchain/helm, helm v3)
#
# Binaries go to a cache directory outside the repository:
#   ${DRAGATE_TOOLCHAIN_DIR:-$HOME/.cache/dragate/toolchain}/<pin-hash>/bin
# where <pin-hash> covers the go.mod/go.sum files and this script, so changing a pin
# builds into a fresh directory and an unchanged pin is a no-op.
#
# Usage: build.sh                 build what is missing; the last stdout line is the bin dir
#        build.sh --print-bin-dir print the bin dir for the current pins and exit (no Go needed)
#
# Logs go to stderr. Needs Go >= 1.21 with the module proxy reachable; the helm pin asks
# for a newer Go, which `go` fetches itself unless GOTOOLCHAIN=local.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pin_files=(
  "$here/kube/go.mod" "$here/kube/go.sum"
  "$here/etcd/go.mod" "$here/etcd/go.sum"
  "$here/helm/go.mod" "$here/helm/go.sum"
  "$here/build.sh"
)
pin_hash="$(cat "${pin_files[@]}" | sha256sum | cut -c1-16)"
root="${DRAGATE_TOOLCHAIN_DIR:-$HOME/.cache/dragate/toolchain}"
pin_dir="$root/$pin_hash"
bin_dir="$pin_dir/bin"

if [[ "${1:-}" == "--print-bin-dir" ]]; then
  echo "$bin_dir"
  exit 0
fi

log() { echo "[toolchain $(date +%H:%M:%S)] $*" >&2; }

# required_version MODULE_DIR MODULE_PATH -> the version the wrapper module requires
required_version() {
  (cd "$1" && go list -m -f '{{.Version}}' "$2")
}

all_present() {
  local name
  for name in "$@"; do
    [[ -x "$bin_dir/$name" ]] || return 1
  done
}

# build COMPONENT MODULE_DIR LDFLAGS TAGS OUT_NAME PACKAGE...
# Builds into a scratch dir and moves the results into bin/ only when all succeeded.
build() {
  local component="$1" module_dir="$2" ldflags="$3" tags="$4" out_name="$5"
  shift 5
  local scratch started elapsed out
  scratch="$(mktemp -d "$pin_dir/.build-$component.XXXXXX")"
  out="$scratch/"
  [[ -n "$out_name" ]] && out="$scratch/$out_name"
  log "$component: go build $* (tags='$tags')"
  started=$SECONDS
  (
    cd "$module_dir"
    CGO_ENABLED=0 "${time_cmd[@]}" go build -trimpath -tags "$tags" -ldflags "$ldflags" \
      -o "$out" "$@"
  )
  elapsed=$((SECONDS - started))
  mv -f "$scratch"/* "$bin_dir/"
  rmdir "$scratch"
  log "$component: built in ${elapsed}s"
}

kube_ldflags() {
  local version="$1" major minor flags="-s -w" pkg
  major="$(echo "${version#v}" | cut -d. -f1)"
  minor="$(echo "${version#v}" | cut -d. -f2)"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean"
  done
  echo "$flags"
}

helm_ldflags() {
  local version="$1" client_go="$2" major minor flags pkg
  # Same derivation as helm's Makefile: client-go v0.X.Y is Kubernetes 1.X.
  major=$(( $(echo "${client_go#v}" | cut -d. -f1) + 1 ))
  minor="$(echo "${client_go#v}" | cut -d. -f2)"
  flags="-s -w -X helm.sh/helm/v3/internal/version.version=$version"
  flags+=" -X helm.sh/helm/v3/internal/version.metadata= "
  flags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    flags+=" -X $pkg.k8sVersionMajor=$major -X $pkg.k8sVersionMinor=$minor"
  done
  echo "$flags"
}

build_kube() {
  local version
  version="$(required_version "$here/kube" k8s.io/kubernetes)"
  build kube "$here/kube" "$(kube_ldflags "$version")" "selinux,notest,grpcnotrace" "" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl
}

build_etcd() {
  # etcd's version string is a constant in go.etcd.io/etcd/api/v3/version; no -X needed.
  build etcd "$here/etcd" "-s -w" "" etcd go.etcd.io/etcd/server/v3
}

build_helm() {
  local version client_go
  version="$(required_version "$here/helm" helm.sh/helm/v3)"
  client_go="$(required_version "$here/helm" k8s.io/client-go)"
  build helm "$here/helm" "$(helm_ldflags "$version" "$client_go")" "" helm \
    helm.sh/helm/v3/cmd/helm
}

main() {
  mkdir -p "$bin_dir"
  if command -v flock >/dev/null; then
    exec 9>"$pin_dir/.lock"
    flock 9
  fi
  time_cmd=()
  if [[ -x /usr/bin/time ]]; then
    time_cmd=(/usr/bin/time -f "[toolchain] go build: %e s wall, %M KiB peak RSS (largest process)")
  fi
  rm -rf "$pin_dir"/.build-*  # scratch dirs left by an interrupted or failed build
  log "pins $pin_hash -> $bin_dir ($(go version))"
  local started=$SECONDS
  all_present kube-apiserver kube-controller-manager kube-scheduler kubectl || build_kube
  all_present etcd || build_etcd
  all_present helm || build_helm
  log "toolchain ready in $((SECONDS - started))s"
  echo "$bin_dir"
}

main "$@"
