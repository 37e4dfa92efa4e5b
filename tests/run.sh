#!/usr/bin/env bash
# Runs every check and test dragate has, from a fresh machine: installs what it needs
# (pip, and the Go-built Kubernetes toolchain of every supported minor, 1.35 to 1.37, cached
# outside the repo), builds the container image (cached outside the repo too; needs root),
# then static checks, then the canaries of the third-party internals against the newest
# releases (tests/canary in a venv of its own, see .ci/newest), then the whole pytest suite
# including the end-to-end tests against a real kube-apiserver (1.37, and the version matrix
# on 1.35 and 1.36) and the image tests.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "install dragate and its test tools"
python3 -m pip install --quiet --disable-pip-version-check -e '.[test,bench]'

step "build the Kubernetes test toolchain: 1.35, 1.36, 1.37 (cached per minor)"
bash tests/e2e/toolchain/build.sh >/dev/null
toolchain_bin() { bash tests/e2e/toolchain/build.sh --print-bin-dir --minor "$1"; }
DRAGATE_TOOLCHAIN_BIN=$(toolchain_bin 1.37)
DRAGATE_TOOLCHAIN_BIN_1_36=$(toolchain_bin 1.36)
DRAGATE_TOOLCHAIN_BIN_1_35=$(toolchain_bin 1.35)
export DRAGATE_TOOLCHAIN_BIN DRAGATE_TOOLCHAIN_BIN_1_36 DRAGATE_TOOLCHAIN_BIN_1_35
export DRAGATE_KUBE_MINORS=1.35,1.36,1.37

step "container image: hadolint, then the build (cached by input hash; a cold build runs twice)"
hadolint Dockerfile
image_dir=$(bash image/build.sh --check-reproducible | tail -n 1)
echo "image: $image_dir"

step "build the CEL oracles (Kubernetes 1.35, 1.36 and 1.37's CEL, cached)"
for minor in 1.35 1.36 1.37; do
  binary=$(bash tests/fidelity/cel/oracle/build.sh "$minor" | tail -n 1)
  export "DRAGATE_CELORACLE_${minor/./_}=$binary"
done
DRAGATE_CELORACLE=$DRAGATE_CELORACLE_1_37
export DRAGATE_CELORACLE

step "ruff"
python3 -m ruff check webhook tests image
python3 -m ruff format --check webhook tests image
step "mypy --strict"
python3 -m mypy
step "layer contracts (import-linter)"
lint-imports

step "canaries against the newest releases (pins ignored; .ci/newest runs the whole suite so)"
bash .ci/newest --canary

step "pytest"
python3 -m pytest "$@"
