#!/usr/bin/env bash
# Three tiny .deb files shaped like the real ones scripts/gpu_deps.sh unpacks (for
# tests/test_scripts.c, case deps_install_fake; no network): the headers, .pc files and
# library names detrain's build looks for, with Debian's quirks -- prefix-relative and
# absolute .pc paths (OpenBLAS's), an absolute symlink (zlib's libz.so), a library under
# /lib -- a stand-in pkgconf that answers --version and --modversion from the .pc files,
# and four small "dataset" files where fetch puts the data set's cut (DIR/fashion-mnist-cut).
# Writes DIR/*.deb, DIR/fashion-mnist-cut and DIR/MANIFEST.
#   tests/gpu_deps_fake.sh DIR
set -euo pipefail
out=$1
ma=x86_64-linux-gnu
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$out"

pkg() { # NAME: an empty package tree with its control file
  mkdir -p "$tree/$1/DEBIAN"
  printf 'Package: %s\nVersion: 1.0-1\nArchitecture: amd64\nMaintainer: detrain tests <none@example.invalid>\nDescription: detrain test package\n' \
    "$1" >"$tree/$1/DEBIAN/control"
}
put() { # PKG PATH [CONTENT]: a file in a package tree
  mkdir -p "$(dirname "$tree/$1/$2")"
  printf '%s\n' "${3:-/* $2 */}" >"$tree/$1/$2"
}

pkg dt-fake-dev
for h in usr/include/yaml.h usr/include/zlib.h usr/include/openssl/evp.h \
         usr/include/$ma/openssl/configuration.h usr/include/$ma/openblas-pthread/cblas.h; do
  put dt-fake-dev "$h"
done
pc() { # PATH NAME VERSION: a Debian-style .pc file relative to ${prefix}
  put dt-fake-dev "$1" "prefix=/usr
exec_prefix=\${prefix}
libdir=\${prefix}/lib/$ma
includedir=\${prefix}/include

Name: $2
Description: fake $2
Version: $3
Libs: -L\${libdir} -l$2
Cflags: -I\${includedir}"
}
pc usr/lib/$ma/pkgconfig/yaml-0.1.pc yaml 0.2.5
pc usr/lib/$ma/pkgconfig/libcrypto.pc crypto 3.0.22
pc usr/lib/$ma/pkgconfig/zlib.pc z 1.2.13
# OpenBLAS's: absolute paths, not ${prefix}-based, and absolute -L/-I flags.
put dt-fake-dev usr/lib/$ma/openblas-pthread/pkgconfig/openblas.pc "libdir=/usr/lib/$ma/openblas-pthread/
includedir=/usr/include/$ma/openblas-pthread/
version=0.3.21
extralib=-lm -lpthread -lgfortran
Name: openblas
Description: fake OpenBLAS
Version: \${version}
Libs: -L\${libdir} -lopenblas
Libs.private: -L/usr/lib/extra \${extralib}
Cflags: -I\${includedir} -I/usr/include/extra"
put dt-fake-dev usr/lib/$ma/libgfortran.so.5 "not a library"
put dt-fake-dev usr/lib/$ma/libdtfakeonly.so.7 "not a library"
put dt-fake-dev lib/$ma/libz.so.1 "not a library"
ln -s /lib/$ma/libz.so.1 "$tree/dt-fake-dev/usr/lib/$ma/libz.so"

pkg dt-fake-pkgconf
put dt-fake-pkgconf usr/bin/pkgconf '#!/bin/sh
# Stand-in for pkgconf: --version, and --modversion MODULE... from the .pc files on
# PKG_CONFIG_LIBDIR (else PKG_CONFIG_PATH).
case "$1" in
  --version) echo 0.0-fake; exit 0 ;;
  --modversion) shift ;;
  *) echo "fake pkgconf: only --version and --modversion" >&2; exit 2 ;;
esac
for m in "$@"; do
  found=""
  for d in $(echo "${PKG_CONFIG_LIBDIR:-$PKG_CONFIG_PATH}" | tr : " "); do
    [ -f "$d/$m.pc" ] && found="$d/$m.pc" && break
  done
  [ -n "$found" ] || { echo "Package $m was not found" >&2; exit 1; }
  v=$(sed -n "s/^Version: //p" "$found")
  case "$v" in "\${version}") v=$(sed -n "s/^version=//p" "$found") ;; esac
  echo "$v"
done'
chmod +x "$tree/dt-fake-pkgconf/usr/bin/pkgconf"
ln -s pkgconf "$tree/dt-fake-pkgconf/usr/bin/pkg-config"

rm -rf "$out"/*.deb "$out/MANIFEST" "$out/fashion-mnist-cut"
echo "# tests/gpu_deps_fake.sh: package file bytes sha256" >"$out/MANIFEST"
for p in dt-fake-dev dt-fake-pkgconf; do
  dpkg-deb --root-owner-group -Zgzip --build "$tree/$p" "$out/${p}_1.0-1_amd64.deb" >/dev/null
  f=$out/${p}_1.0-1_amd64.deb
  echo "$p $(basename "$f") $(stat -c %s "$f") $(sha256sum "$f" | cut -d' ' -f1)" >>"$out/MANIFEST"
done
mkdir -p "$out/fashion-mnist-cut"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  echo "fake $f" | gzip -n >"$out/fashion-mnist-cut/$f.gz"
  f=fashion-mnist-cut/$f.gz
  echo "fashion-mnist-cut $f $(stat -c %s "$out/$f") $(sha256sum "$out/$f" | cut -d' ' -f1)" >>"$out/MANIFEST"
done
