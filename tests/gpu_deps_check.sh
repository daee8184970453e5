#!/usr/bin/env bash
# scripts/gpu_deps.sh against the real Debian archive (tests/test_scripts.c, case
# deps_fetch_build; label slow: it downloads ~50 MB and builds detrain, ~2 minutes):
# fetch, install into a fresh prefix, then configure and build detrain from what the prefix
# provides ALONE and train a few steps on the prefix's Fashion-MNIST. As root, the host's
# own copies (headers, .pc files, pkg-config, OpenBLAS, libyaml, libgfortran, the dataset)
# are hidden first by bind mounts in a private mount namespace (unshare), as on a GPU
# machine that has none of them; the host itself is not touched.
#   tests/gpu_deps_check.sh SOURCE_DIR WORK_DIR
# Exit 0 pass, 1 fail, 77 skipped (apt cannot download: offline, or not Debian).
set -euo pipefail

src=$1
work=$2
fail() { echo "gpu_deps_check: FAIL: $*" >&2; exit 1; }
say() { echo "gpu_deps_check: $*" >&2; }

if [ "${3:-}" != --inside ]; then
  command -v apt-get >/dev/null || { echo "SKIPPED: no apt-get (not Debian)" >&2; exit 77; }
  mkdir -p "$work"
  if ! bash "$src/scripts/gpu_deps.sh" fetch "$work/debs"; then
    probe=$(mktemp -d)
    if ! (cd "$probe" && timeout 60 apt-get -o APT::Sandbox::User=root download zlib1g >/dev/null 2>&1); then
      rm -rf "$probe"
      echo "SKIPPED: apt-get cannot download (offline?)" >&2
      exit 77
    fi
    rm -rf "$probe"
    fail "fetch failed although apt-get can download"
  fi
  [ "$(ls "$work/debs"/*.deb | wc -l)" -eq 13 ] || fail "expected 13 .deb files in $work/debs"
[ "$(ls "$work/debs"/fashion-mnist-cut/*.gz | wc -l)" -eq 4 ] || fail "expected the 4 files of Fashion-MNIST's cut in $work/debs"
  if [ "$(id -u)" -eq 0 ] && unshare --mount --propagation private true 2>/dev/null; then
    exec unshare --mount --propagation private bash "$0" "$src" "$work" --inside hide
  fi
  say "not root or no unshare: the host's packages stay visible; checking paths only"
  exec bash "$0" "$src" "$work" --inside
fi

# ---- inside: hide the host's copies, install, build, run ------------------------------------
if [ "${4:-}" = hide ]; then
  ma=x86_64-linux-gnu
  empty_dir=$work/hidden-dir
  empty_file=$work/hidden-file
  fake_pc=$work/hidden-pkgconf
  mkdir -p "$empty_dir"
  : >"$empty_file"
  printf '#!/bin/sh\necho "pkg-config is hidden by tests/gpu_deps_check.sh" >&2\nexit 127\n' >"$fake_pc"
  chmod +x "$fake_pc"
  hide() { # PATH...: bind an empty stand-in over each that exists (its real target if a link)
    local p r
    for p in "$@"; do
      [ -e "$p" ] || continue
      r=$(readlink -f "$p")
      if [ -d "$r" ]; then mount --bind "$empty_dir" "$r"; else mount --bind "$empty_file" "$r"; fi
      say "hidden: $p"
    done
  }
  hide /usr/include/yaml.h /usr/include/zlib.h /usr/include/zconf.h /usr/include/openssl \
       /usr/include/$ma/openssl /usr/include/$ma/openblas-pthread \
       /usr/lib/$ma/pkgconfig /usr/lib/pkgconfig /usr/share/pkgconfig \
       /usr/lib/$ma/libyaml-0.so.2 /usr/lib/$ma/libyaml.so /usr/lib/$ma/libgfortran.so.5 \
       /usr/lib/$ma/libquadmath.so.0 /usr/lib/$ma/openblas-pthread /usr/share/datasets/fashion-mnist
  for p in /usr/bin/pkgconf /usr/bin/pkg-config; do
    [ -e "$p" ] && mount --bind "$fake_pc" "$(readlink -f "$p")" && say "hidden: $p"
  done
  ! pkg-config --version >/dev/null 2>&1 || fail "the host's pkg-config still answers"
  [ ! -s /usr/include/yaml.h ] || fail "the host's yaml.h is still visible"
fi

prefix=$work/prefix
rm -rf "$prefix"
bash "$src/scripts/gpu_deps.sh" install "$work/debs" "$prefix" || fail "install failed"
# Idempotent: a second install gives the same env.sh (but its time stamp) and .pc files.
cp "$prefix/env.sh" "$work/env.sh.first"
sum_pc() { find "$prefix" -name '*.pc' -print0 | sort -z | xargs -0 sha256sum; }
sum_pc >"$work/pc.first"
bash "$src/scripts/gpu_deps.sh" install "$work/debs" "$prefix" >/dev/null 2>&1 || fail "second install failed"
diff <(grep -v '^# Written' "$work/env.sh.first") <(grep -v '^# Written' "$prefix/env.sh") ||
  fail "a second install wrote another env.sh"
sum_pc | diff "$work/pc.first" - || fail "a second install changed the .pc files"

# shellcheck disable=SC1091
. "$prefix/env.sh"
if [ "${4:-}" = hide ]; then
  [ "$(command -v pkg-config)" = "$prefix/bin/pkg-config" ] ||
    fail "env.sh does not put the prefix's pkg-config first on PATH: $(command -v pkg-config)"
  [ -e "$prefix/runtime-lib/libgfortran.so.5" ] ||
    fail "runtime-lib lacks libgfortran.so.5, which the host no longer has"
else
  # The host's .pc files and pkg-config must not be used: the prefix's only.
  export PKG_CONFIG_LIBDIR=$PKG_CONFIG_PATH PKG_CONFIG=$prefix/bin/pkg-config
fi
[ -f "$DETRAIN_DATA/train-images-idx3-ubyte.gz" ] || fail "DETRAIN_DATA=$DETRAIN_DATA has no images"

build=$work/build
rm -rf "$build"
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDETRAIN_CUDA=OFF \
      -DBUILD_TESTING=OFF >"$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; fail "configure failed"; }
cmake --build "$build" --target detrain -j "$(nproc)" >"$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log" >&2; fail "build failed"; }

# Every dependency CMake found is the prefix's.
for var in PKG_CONFIG_EXECUTABLE pkgcfg_lib_YAML_yaml YAML_INCLUDE_DIRS pkgcfg_lib_OPENBLAS_openblas \
           OPENBLAS_INCLUDE_DIRS OPENSSL_CRYPTO_LIBRARY OPENSSL_INCLUDE_DIR ZLIB_LIBRARY_RELEASE \
           ZLIB_INCLUDE_DIR; do
  val=$(grep -E "^$var:[A-Z]+=" "$build/CMakeCache.txt" | head -1 | cut -d= -f2- || true)
  [ -n "$val" ] || fail "CMakeCache.txt has no $var"
  case "$val" in "$prefix"/*) say "$var=$val" ;; *) fail "$var=$val is not in $prefix" ;; esac
done
# ... and what the loader takes at run time (the build's RUNPATH, then runtime-lib).
ldd "$build/detrain" >"$work/ldd.txt"
cat "$work/ldd.txt" >&2
! grep -q 'not found' "$work/ldd.txt" || fail "detrain has unresolved libraries"
for lib in libyaml-0.so.2 libopenblas.so.0 libgfortran.so.5; do
  grep "$lib" "$work/ldd.txt" | grep -q "=> $prefix/" || fail "$lib is not loaded from $prefix"
done

out=$work/run
rm -rf "$out"
"$build/detrain" run "$src/configs/quickstart.yaml" --out "$out" --quiet --set train.steps=20 \
  --set 'policies=[portable, fast]' --set replicas=1 --set report.snapshots=0 \
  --set report.overhead_samples=0 || fail "the training run failed"
grep -q "\"dataset_dir\": \"$DETRAIN_DATA\"" "$out/run.json" || fail "run.json does not name $DETRAIN_DATA"
grep -q '"status": "completed"' "$out/run.json" || fail "the run did not complete"
[ "$(wc -l <"$out/portable/replica-0/trace.csv")" -eq 22 ] || fail "trace.csv does not hold 21 steps"
say "PASS: built from $prefix alone and trained 20 steps on $DETRAIN_DATA"
