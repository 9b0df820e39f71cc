#!/usr/bin/env bash
# Build the Debian package of mcpg: packaging/deb/build.sh [--build DIR] [--out DIR]
#
#   --build DIR   the Release build to package (default build-deb). A folder
#                 without a CMakeCache.txt is configured first (Release,
#                 prefix /usr, no tests, Debian's hardening flags); an
#                 existing one must be Release, not sanitized, and configured
#                 for prefix /usr (the unit and /etc/mcpg are placed at
#                 configure time). Either way it is brought up to date.
#   --out DIR     where mcpg_<version>_<arch>.deb goes (default build)
#
# What `cmake --install --prefix /usr` installs, stripped, is the package:
# whatever the tree's install rules add (a unit, man pages) comes in with no
# change here; files under /etc become conffiles. The Depends line is
# dpkg-shlibdeps' reading of every ELF file. Prints the .deb's path last.
# `make deb` runs it and then lintian.
set -euo pipefail
umask 022

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=build-deb
out=build

usage() { echo "usage: $0 [--build DIR] [--out DIR]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) [ $# -ge 2 ] || usage; build=$2; shift 2 ;;
    --out)   [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
    *) usage ;;
  esac
done
cd "$src"

die() { echo "packaging/deb/build.sh: $*" >&2; exit 1; }

cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }

# A build of its own gets Debian's hardening flags (dpkg-buildflags: stack
# protector, _FORTIFY_SOURCE, read-only relocations bound at load), less
# -Wdate-time: modules stamp their build id with __DATE__ (MCPG_BUILD_ID in
# <mcpg/sdk.h>), which that warning turns into an error under -Werror.
configure_build() {
  local flags
  flags=$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --export=sh)
  (eval "$flags"
   CFLAGS="$CFLAGS ${CPPFLAGS//-Wdate-time/}" LDFLAGS="$LDFLAGS" \
     cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
           -DCMAKE_INSTALL_PREFIX=/usr -DMCPG_TESTS=OFF >&2)
}

# A package of a Debug or sanitized build is not what anyone should run; one
# configured for another prefix would point its unit at the wrong binary.
prepare_build() {
  [ -f "$build/CMakeCache.txt" ] || configure_build
  local cache=$build/CMakeCache.txt
  [ "$(cache_value CMAKE_BUILD_TYPE)" = Release ] ||
    die "$cache: CMAKE_BUILD_TYPE is '$(cache_value CMAKE_BUILD_TYPE)', a package needs Release"
  case "$(cache_value MCPG_SANITIZE)" in
    ON|on|1|TRUE|true) die "$cache: MCPG_SANITIZE is on, a package needs a plain build" ;;
  esac
  [ "$(cache_value CMAKE_INSTALL_PREFIX)" = /usr ] ||
    die "$cache: CMAKE_INSTALL_PREFIX is '$(cache_value CMAKE_INSTALL_PREFIX)', a package needs /usr"
  cmake --build "$build" >&2
}

project_version() {
  sed -n 's/^project(mcpg VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt
}

# Debian's own variables name whoever builds the package; else the author of
# the commit it is built from.
maintainer() {
  if [ -n "${DEBEMAIL:-}" ]; then
    echo "${DEBFULLNAME:-mcpg maintainers} <$DEBEMAIL>"
  else
    git -C "$src" log -1 --format='%an <%ae>' 2>/dev/null ||
      die "set DEBEMAIL (and DEBFULLNAME): no git history to name a maintainer"
  fi
}

# The changelog's date and the copyright's year are the commit's, so the
# same tree makes the same package.
changelog_date() {
  git -C "$src" log -1 --format=%cD 2>/dev/null || date -R
}

copyright_year() {
  git -C "$src" log -1 --format=%cd --date=format:%Y 2>/dev/null || date +%Y
}

elf_files() {
  find "$root" -type f ! -path "$root/DEBIAN/*" -exec sh -c \
    'head -c4 "$1" | grep -q "^.ELF" && echo "$1"' _ {} \;
}

# As Debian's own packages are stripped (dh_strip): no symbols or debug
# information, no .comment, in programs, modules and static libraries.
strip_files() {
  elf_files | xargs -r -d '\n' strip --remove-section=.comment --remove-section=.note \
    --strip-unneeded
  find "$root" -name '*.a' -exec strip --strip-debug --remove-section=.comment {} +
}

# dpkg-shlibdeps reads debian/control of the folder it runs in.
depends_line() {
  local work=$staging/shlibdeps
  mkdir -p "$work/debian"
  printf 'Source: mcpg\n\nPackage: mcpg\nArchitecture: any\n' > "$work/debian/control"
  local -a args=()
  while read -r f; do args+=("-e$f"); done < <(elf_files)
  [ ${#args[@]} -gt 0 ] || die "no ELF file in the package"
  (cd "$work" && dpkg-shlibdeps -O "${args[@]}" 2>/dev/null) | sed -n 's/^shlibs:Depends=//p'
}

fill() { # fill TEMPLATE: the @KEY@s from the variables of the same name
  sed -e "s#@VERSION@#$version#g" -e "s#@ARCH@#$arch#g" -e "s#@MAINTAINER@#$maint#g" \
      -e "s#@INSTALLED_SIZE@#${installed_size:-}#g" -e "s#@DEPENDS@#${depends:-}#g" \
      -e "s#@DATE@#$date#g" -e "s#@YEAR@#$year#g" "$1"
}

add_docs() {
  local doc=$root/usr/share/doc/mcpg
  install -d "$doc" "$root/usr/share/lintian/overrides"
  fill "$here/copyright.in" > "$doc/copyright"
  fill "$here/changelog.in" | gzip -9n > "$doc/changelog.Debian.gz"
  install -m 0644 "$here/lintian-overrides" "$root/usr/share/lintian/overrides/mcpg"
}

add_control() {
  install -d "$root/DEBIAN"
  if [ -d "$root/etc" ]; then
    (cd "$root" && find etc -type f | sort | sed 's|^|/|') > "$root/DEBIAN/conffiles"
  fi
  (cd "$root" && find . -type f ! -path './DEBIAN/*' -printf '%P\n' | LC_ALL=C sort |
     xargs -d '\n' md5sum) > "$root/DEBIAN/md5sums"
  depends=$(depends_line)
  [ -n "$depends" ] || die "dpkg-shlibdeps found no dependency"
  installed_size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
  fill "$here/control.in" > "$root/DEBIAN/control"
}

prepare_build
version="$(project_version)-1"
[ "$version" != "-1" ] || die "CMakeLists.txt: no project(mcpg VERSION ...)"
arch=$(dpkg --print-architecture)
maint=$(maintainer)
date=$(changelog_date)
year=$(copyright_year)

staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
trap 'exit 1' INT TERM
root=$staging/root
install -d -m 0755 "$root"
DESTDIR=$root cmake --install "$build" --prefix /usr >&2
strip_files
add_docs
add_control

mkdir -p "$out"
deb=$out/mcpg_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >&2
echo "$deb"
