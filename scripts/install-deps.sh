#!/usr/bin/env bash
# Install what mcpg needs to build, run and test, on Debian 12 (bookworm).
#
# Idempotent: it asks dpkg what is already there and only calls apt-get for
# what is missing, so a second run is fast and needs no network.
# Run as root (or with sudo available) on a fresh machine; when everything is
# already installed it runs as any user.
set -euo pipefail

cd "$(dirname "$0")/.."

# ---- apt packages -----------------------------------------------------------
# build-essential .. pkg-config : the C toolchain and build system
# clang, libclang-rt-14-dev     : clang and its sanitizer/libFuzzer runtimes
#                                 (libclang-rt-14-dev is only a Recommends: list it)
# libuv1-dev libjansson-dev libssl-dev : libraries the kernel and modules link
# libffi-dev                    : backend_ffi calls C functions through libffi
# libhiredis-dev                : coordinator_redis (hiredis 0.14.1 and its libuv adapter)
# redis-server redis-tools      : the Redis the coordinator_redis tests start, and redis-cli
# openssl                       : the command that makes the TLS tests' certificates, and
#                                 s_client, which test_tls_renegotiation drives
# node-llhttp                   : llhttp C sources (/usr/share/llhttp), no -dev package
# python3                       : integration tests (/usr/bin/python3, stdlib only)
# curl                          : README example, health checks
# nginx-light wrk               : benchmark baseline and load generator
# procps util-linux             : ps/pgrep for tests, taskset for benchmarks
# libnats-dev nats-server       : coordinator_nats (nats.c) and the server its tests start
# systemd groff-base            : tests/dist: systemd-analyze verify on the unit, groff on the man pages
APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  clang libclang-rt-14-dev
  libuv1-dev libjansson-dev libssl-dev
  libffi-dev openssl
  libhiredis-dev redis-server redis-tools
  node-llhttp
  python3 curl
  nginx-light wrk
  procps util-linux
  libnats-dev nats-server
  systemd groff-base
)

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
# ---- npm folders: add below this line -----------------------------------------
npm_ci_in tests/conformance   # the MCP conformance suite and the Node 22 it runs on
npm_ci_in tests/clients       # the official TypeScript SDK clients, v1 and v2

# ---- end of npm folders -------------------------------------------------------

exit 0
