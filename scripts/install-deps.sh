#!/usr/bin/env bash
# Install what mcpg needs to build, run and test, on Debian 12 (bookworm);
# --run and --test install a part of it (below).
#
# Idempotent: it asks dpkg what is already there and only calls apt-get for
# what is missing, so a second run is fast and needs no network.
# Run as root (or with sudo available) on a fresh machine; when everything is
# already installed it runs as any user.
set -euo pipefail

cd "$(dirname "$0")/.."

# ---- what to install ----------------------------------------------------------
#   scripts/install-deps.sh          everything: `make test` (make deps)
#   scripts/install-deps.sh --run    only what building and running the gateway
#                                    needs: `make run` (make deps-run); no Node.js
#   scripts/install-deps.sh --test   only what the tests, fuzzers and benchmarks
#                                    add on top of --run (apt packages, npm folders)
want_run=1 want_test=1
case "${1:-}" in
  "")     ;;
  --run)  want_test=0 ;;
  --test) want_run=0 ;;
  *) echo "install-deps: unknown option \"$1\" (use --run, --test or nothing)" >&2; exit 2 ;;
esac

# ---- apt packages: building and running the gateway ----------------------------
# build-essential .. pkg-config : the C toolchain and build system
# libuv1-dev libjansson-dev libssl-dev : libraries the kernel and modules link
# libffi-dev                    : backend_ffi calls C functions through libffi
# libhiredis-dev                : coordinator_redis (hiredis 0.14.1 and its libuv adapter)
# libnats-dev                   : coordinator_nats (nats.c)
# node-llhttp                   : llhttp C sources (/usr/share/llhttp), no -dev package
# curl                          : the README's "Try it" example, health checks
RUN_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libuv1-dev libjansson-dev libssl-dev
  libffi-dev
  libhiredis-dev
  libnats-dev
  node-llhttp
  curl
)

# ---- apt packages: tests, fuzzers and benchmarks ---------------------------------
# clang, libclang-rt-14-dev     : clang and its sanitizer/libFuzzer runtimes
#                                 (libclang-rt-14-dev is only a Recommends: list it)
# redis-server redis-tools      : the Redis the coordinator_redis tests start, and redis-cli
# nats-server                   : the NATS server the coordinator_nats tests start
# openssl                       : the command that makes the TLS tests' certificates, and
#                                 s_client, which test_tls_renegotiation drives
# python3                       : integration tests (/usr/bin/python3, stdlib only)
# nginx-light wrk               : benchmark baseline and load generator
# procps util-linux             : ps/pgrep for tests, taskset for benchmarks
# systemd groff-base            : tests/dist: systemd-analyze verify on the unit, groff on the man pages
# lintian                       : the Debian package's checks (make deb, tests/packaging)
# valgrind                      : callgrind, for instructions per call where the kernel gives
#                                 no hardware counter (mcpg-bench-module --callgrind, bench/micro.sh)
# doxygen                       : the SDK reference (make sdk-reference) and its check that
#                                 every public declaration is documented (docs_sdk_reference)
# zlib1g-dev                    : examples/backend_zlib, built out of tree by tests/outoftree
TEST_PACKAGES=(
  clang libclang-rt-14-dev
  redis-server redis-tools
  nats-server
  openssl
  python3
  nginx-light wrk
  procps util-linux
  systemd groff-base
  lintian
  valgrind
  doxygen
  zlib1g-dev
)

APT_PACKAGES=()
[ "$want_run" = 1 ] && APT_PACKAGES+=("${RUN_PACKAGES[@]}")
[ "$want_test" = 1 ] && APT_PACKAGES+=("${TEST_PACKAGES[@]}")

missing=()
for p in "${APT_PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  if [ "$status" != "installed" ]; then
    missing+=("$p")
  fi
done

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "install-deps: need root to run: $*" >&2
    exit 1
  fi
}

if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all ${#APT_PACKAGES[@]} apt packages present"
fi

# ---- npm packages under test folders -----------------------------------------
# Test folders that need npm packages (the official MCP TypeScript SDK clients,
# the conformance suite and the Node 22 it needs) install them into the folder,
# never globally. Each folder holds a package.json and a package-lock.json with
# the versions locked; one npm_ci_in line per folder below.
#
# npm_ci_in runs `npm ci` only when node_modules is missing or older than the
# lock file, so a second run is quiet, fast and offline. Node.js 20 and its npm
# come with the machine (a Node.js build that bundles npm): Debian's own `npm`
# package would pull Debian's Node 18 over it, so it is not in APT_PACKAGES.
npm_ci_in() {
  local dir=$1
  command -v npm >/dev/null 2>&1 || {
    echo "install-deps: npm is missing (needed for $dir); install Node.js 20 with npm" >&2
    exit 1
  }
  [ -f "$dir/package-lock.json" ] || { echo "install-deps: $dir has no package-lock.json" >&2; exit 1; }
  if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules" ]; then
    echo "install-deps: npm ci in $dir"
    (cd "$dir" && npm ci --no-audit --no-fund)
    touch "$dir/node_modules"
  fi
}
[ "$want_test" = 1 ] || exit 0
# ---- npm folders: add below this line -----------------------------------------
npm_ci_in tests/conformance   # the MCP conformance suite and the Node 22 it runs on
npm_ci_in tests/clients       # the official TypeScript SDK clients, v1 and v2
npm_ci_in tests/newcomer      # README's "Connecting a client": Inspector CLI, mcp-remote
npm_ci_in tests/otlp          # a tiny OTLP collector: the OpenTelemetry protobuf definitions

# ---- end of npm folders -------------------------------------------------------

exit 0
