#!/usr/bin/env bash
# Build the real-Kubernetes e2e toolchain from the Go module proxy, one control plane per
# supported Kubernetes minor:
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
#                                       (toolchain/kube-1.37, Kubernetes v1.37.x; the default)
#   kube-apiserver, kube-controller-manager, kube-scheduler
#                                       (toolchain/kube-1.35 and kube-1.36; their kubectl is
#                                        1.37's, within the version skew kubectl supports)
#   etcd                                (toolchain/etcd, etcd server v3.6.x, all minors)
#   helm                                (toolchain/helm, helm v3, all minors)
#
# Binaries go to a cache directory outside the repository:
#   ${DRAGATE_TOOLCHAIN_DIR:-$HOME/.cache/dragate/toolchain}/
#     build/kube-<minor>-<hash>/   one minor's Kubernetes binaries, <hash> over that minor's
#                                  go.mod/go.sum and this script
#     build/shared-<hash>/         etcd and helm, <hash> over their go.mod/go.sum and this script
#     <minor>-<hash>/bin/          what the tests use: symlinks to the minor's binaries, etcd,
#                                  helm and (for older minors) 1.37's kubectl; <hash> covers
#                                  every pin those come from
# so changing one minor's pin builds that minor alone, and an unchanged pin is a no-op.
#
# Usage: build.sh [--minor M]...                 build what is missing for minor M (repeatable;
#                                                 default every minor); the last stdout line
#                                                 is the bin dir of the last minor built
#        build.sh --print-bin-dir [--minor M]    print the bin dir of minor M (default 1.37)
#                                                 and exit (no Go needed)
#
# Logs go to stderr. Needs Go >= 1.21 with the module proxy reachable; the pins ask for a
# newer Go, which `go` fetches itself unless GOTOOLCHAIN=local.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
minors=(1.35 1.36 1.37)
default_minor=1.37
kubectl_minor=1.37  # the one kubectl built; older minors use it
root="${DRAGATE_TOOLCHAIN_DIR:-$HOME/.cache/dragate/toolchain}"

# pin_hash FILE... -> 16 hex digits over the files and this script
pin_hash() {
  cat "$@" "$here/build.sh" | sha256sum | cut -c1-16
}

kube_dir() {
  echo "$root/build/kube-$1-$(pin_hash "$here/kube-$1/go.mod" "$here/kube-$1/go.sum")"
}

shared_dir() {
  echo "$root/build/shared-$(pin_hash "$here"/{etcd,helm}/go.{mod,sum})"
}

# bin_dir MINOR -> the dir of symlinks the tests use for MINOR
bin_dir() {
  local minor="$1" key
  key="$(kube_dir "$1") $(kube_dir "$kubectl_minor") $(shared_dir)"
  echo "$root/$minor-$(echo "$key" | sha256sum | cut -c1-16)/bin"
}

kube_tools() {
  if [[ "$1" == "$kubectl_minor" ]]; then
    echo kube-apiserver kube-controller-manager kube-scheduler kubectl
  else
    echo kube-apiserver kube-controller-manager kube-scheduler
  fi
}

known_minor() {
  local minor
  for minor in "${minors[@]}"; do [[ "$minor" == "$1" ]] && return 0; done
  echo "build.sh: unknown minor '$1' (known: ${minors[*]})" >&2
  exit 2
}

log() { echo "[toolchain $(date +%H:%M:%S)] $*" >&2; }

# required_version MODULE_DIR MODULE_PATH -> the version the wrapper module requires
required_version() {
  (cd "$1" && go list -m -f '{{.Version}}' "$2")
}

# all_present DIR NAME... -> whether DIR holds every NAME as an executable
all_present() {
  local dir="$1" name
  shift
  for name in "$@"; do
    [[ -x "$dir/$name" ]] || return 1
  done
}

# build COMPONENT OUT_DIR MODULE_DIR LDFLAGS TAGS OUT_NAME PACKAGE...
# Builds into a scratch dir and moves the results into OUT_DIR only when all succeeded.
build() {
  local component="$1" out_dir="$2" module_dir="$3" ldflags="$4" tags="$5" out_name="$6"
  shift 6
  local scratch started elapsed out
  mkdir -p "$out_dir"
  rm -rf "$out_dir"/.build-*  # scratch dirs left by an interrupted or failed build
  scratch="$(mktemp -d "$out_dir/.build-$component.XXXXXX")"
  out="$scratch/"
  [[ -n "$out_name" ]] && out="$scratch/$out_name"
  log "$component: go build $* (tags='$tags') -> $out_dir"
  started=$SECONDS
  (
    cd "$module_dir"
    CGO_ENABLED=0 "${time_cmd[@]}" go build -trimpath -tags "$tags" -ldflags "$ldflags" \
      -o "$out" "$@"
  )
  elapsed=$((SECONDS - started))
  mv -f "$scratch"/* "$out_dir/"
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
  local minor="$1" out_dir version pkg packages=()
  out_dir="$(kube_dir "$minor")"
  # shellcheck disable=SC2046
  all_present "$out_dir" $(kube_tools "$minor") && return 0
  version="$(required_version "$here/kube-$minor" k8s.io/kubernetes)"
  for pkg in $(kube_tools "$minor"); do
    packages+=("k8s.io/kubernetes/cmd/$pkg")
  done
  build "kube-$minor" "$out_dir" "$here/kube-$minor" "$(kube_ldflags "$version")" \
    "selinux,notest,grpcnotrace" "" "${packages[@]}"
}

build_kubectl() {
  local out_dir version
  out_dir="$(kube_dir "$kubectl_minor")"
  all_present "$out_dir" kubectl && return 0
  version="$(required_version "$here/kube-$kubectl_minor" k8s.io/kubernetes)"
  build "kubectl-$kubectl_minor" "$out_dir" "$here/kube-$kubectl_minor" \
    "$(kube_ldflags "$version")" "selinux,notest,grpcnotrace" "" k8s.io/kubernetes/cmd/kubectl
}

build_etcd() {
  # etcd's version string is a constant in go.etcd.io/etcd/api/v3/version; no -X needed.
  all_present "$(shared_dir)" etcd && return 0
  build etcd "$(shared_dir)" "$here/etcd" "-s -w" "" etcd go.etcd.io/etcd/server/v3
}

build_helm() {
  local version client_go
  all_present "$(shared_dir)" helm && return 0
  version="$(required_version "$here/helm" helm.sh/helm/v3)"
  client_go="$(required_version "$here/helm" k8s.io/client-go)"
  build helm "$(shared_dir)" "$here/helm" "$(helm_ldflags "$version" "$client_go")" "" helm \
    helm.sh/helm/v3/cmd/helm
}

# link_bin_dir MINOR: the tests' bin dir for MINOR, symlinks to the built binaries
link_bin_dir() {
  local minor="$1" dir name
  dir="$(bin_dir "$minor")"
  mkdir -p "$dir"
  for name in $(kube_tools "$minor"); do
    ln -sfn "$(kube_dir "$minor")/$name" "$dir/$name"
  done
  ln -sfn "$(kube_dir "$kubectl_minor")/kubectl" "$dir/kubectl"
  ln -sfn "$(shared_dir)/etcd" "$dir/etcd"
  ln -sfn "$(shared_dir)/helm" "$dir/helm"
}

main() {
  local print=false wanted=() minor last="$default_minor"
  while (($#)); do
    case "$1" in
      --print-bin-dir) print=true ;;
      --minor) known_minor "${2:-}"; wanted+=("$2"); last="$2"; shift ;;
      *) echo "usage: build.sh [--print-bin-dir] [--minor M]..." >&2; exit 2 ;;
    esac
    shift
  done
  if $print; then
    bin_dir "$last"
    return 0
  fi
  if ((${#wanted[@]} == 0)); then
    wanted=("${minors[@]}")
    last="$default_minor"
  fi
  mkdir -p "$root"
  if command -v flock >/dev/null; then
    exec 9>"$root/.lock"
    flock 9
  fi
  time_cmd=()
  if [[ -x /usr/bin/time ]]; then
    time_cmd=(/usr/bin/time -f "[toolchain] go build: %e s wall, %M KiB peak RSS (largest process)")
  fi
  log "minors ${wanted[*]} -> $root ($(go version))"
  local started=$SECONDS
  for minor in "${wanted[@]}"; do
    build_kube "$minor"
  done
  build_kubectl
  build_etcd
  build_helm
  for minor in "${wanted[@]}"; do
    link_bin_dir "$minor"
    log "$minor: $(bin_dir "$minor")"
  done
  log "toolchain ready in $((SECONDS - started))s"
  bin_dir "$last"
}

main "$@"
