#!/usr/bin/env bash
# Carry detrain's build and run dependencies to a machine without a package registry (the
# GPU machine): Debian 12 .deb files fetched here, unpacked there into a folder of their own.
#
#   scripts/gpu_deps.sh fetch DIR           (Debian 12, amd64, apt works) download the .debs
#                                           into DIR, with DIR/MANIFEST (name, file, size,
#                                           SHA-256); skips files already there and intact.
#                                           Of Fashion-MNIST only the part GPU runs read is
#                                           kept (DIR/fashion-mnist-cut: scripts/fmnist_cut.sh)
#   scripts/gpu_deps.sh install DIR PREFIX  (any x86-64 Linux with glibc >= 2.36, no network)
#                                           check and `dpkg-deb -x` every .deb of DIR into
#                                           PREFIX (never /), point the pkg-config files at
#                                           PREFIX, write PREFIX/env.sh and print its exports
#
# Both are safe to run again. The libraries are Debian 12's (glibc 2.36): they run on any
# newer glibc (Ubuntu 24.04 has 2.39). Only what the build needs and the host lacks is put
# on LD_LIBRARY_PATH (PREFIX/runtime-lib), so programs run after `. PREFIX/env.sh` keep
# the host's own zlib, OpenSSL and so on.
set -euo pipefail

prog=gpu_deps.sh
# What the build (CMakeLists.txt: pkg-config, yaml-0.1, openblas, OpenSSL >= 1.1 libcrypto,
# zlib) and a training run (Fashion-MNIST) need, runtime and -dev, with the runtime needs
# of each that a CUDA machine may lack. libc6, libgcc-s1 and libc6-dev are left out: any
# machine with a compiler has them. libopenblas-dev and libopenblas0 are empty
# metapackages (their files come from the -pthread packages), pkg-config a transitional one.
packages=(
  libyaml-0-2 libyaml-dev                     # config files
  libopenblas0-pthread libopenblas-pthread-dev # sgemm for math: fast
  libgfortran5 libquadmath0                   # what libopenblas.so.0 links to
  libssl3 libssl-dev                          # SHA-256 (OpenSSL EVP)
  zlib1g zlib1g-dev                           # .gz datasets
  pkgconf pkgconf-bin libpkgconf3             # pkg-config (CMake's FindPkgConfig)
)
# Fashion-MNIST (/usr/share/datasets/fashion-mnist in it): fetched, cut to the examples GPU
# runs read (DIR/fashion-mnist-cut, 5 MB of its 31) and not kept.
dataset_pkg=dataset-fashion-mnist
multiarch=x86_64-linux-gnu
dataset_rel=usr/share/datasets/fashion-mnist
dataset_files=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz
               t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
# fmnist_cut_train, fmnist_cut_test, fmnist_cut_dir, fmnist_cut_file
. "$(dirname "${BASH_SOURCE[0]}")/fmnist_cut.sh"

die() {
  echo "$prog: error: $*" >&2
  exit 1
}
note() { echo "$prog: $*" >&2; }

usage() {
  cat >&2 <<EOF
usage: scripts/gpu_deps.sh fetch DIR
       scripts/gpu_deps.sh install DIR PREFIX
  fetch    download the Debian 12 packages detrain needs (${#packages[@]}, about 16 MB) into
           DIR, and of Fashion-MNIST the first $fmnist_cut_train training and $fmnist_cut_test test
           examples (DIR/$fmnist_cut_dir, 5 MB); run where apt works
  install  unpack every .deb of DIR into PREFIX, fix the pkg-config files and write
           PREFIX/env.sh (source it before configuring or running detrain)
EOF
  exit 2
}

# Absolute path of $1 (which need not exist yet), without symlink games.
abspath() {
  case "$1" in
    /*) printf '%s\n' "$1" ;;
    *) printf '%s/%s\n' "$PWD" "$1" ;;
  esac | sed -e 's#/\./#/#g' -e 's#/\.$##' -e 's#//*#/#g' -e 's#\(.\)/$#\1#'
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# ---- fetch ----------------------------------------------------------------------------------

# When DIR lies in a git work tree and is not ignored, add it to .git/info/exclude (local,
# never committed): ~50 MB of .debs must not be committed, and a folder that git ignores
# is carried to the GPU machine only when named (see docs/gpu.md).
exclude_from_git() {
  local dir=$1 top rel
  top=$(git -C "$dir" rev-parse --show-toplevel 2>/dev/null) || return 0
  rel=${dir#"$top"/}
  [ "$rel" != "$dir" ] || return 0
  if git -C "$top" check-ignore -q "$rel/MANIFEST" 2>/dev/null; then
    return 0
  fi
  local exclude
  exclude=$(git -C "$top" rev-parse --git-path info/exclude)
  case "$exclude" in /*) ;; *) exclude=$top/$exclude ;; esac
  mkdir -p "$(dirname "$exclude")"
  echo "/$rel/" >>"$exclude"
  note "added /$rel/ to $exclude (git ignores it; carry it to the GPU machine by name)"
}

# apt-get download's plan: one line per package, "'URI' FILE SIZE SHA256:HEX".
print_uris() {
  apt-get download --print-uris "${packages[@]}" "$dataset_pkg" 2>&1
}

# DIR/fashion-mnist-cut from the dataset package (downloaded into a scratch folder, then
# deleted): the first fmnist_cut_train / fmnist_cut_test examples of each split. Kept when
# its SOURCE stamp names the same package file, SHA-256 and counts and its files are there.
# Prints the MANIFEST rows of its files.
fetch_dataset_cut() {
  local dir=$1 file=$2 sum=$3 sandbox=("${@:4}") cut=$1/$fmnist_cut_dir
  local stamp="$file $sum train $fmnist_cut_train test $fmnist_cut_test" f
  local complete=1
  for f in "${dataset_files[@]}"; do [ -f "$cut/$f" ] || complete=0; done
  if [ $complete -eq 0 ] || [ "$(cat "$cut/SOURCE" 2>/dev/null)" != "$stamp" ]; then
    local tmp
    tmp=$(mktemp -d "$dir/.dataset.XXXXXX")
    (cd "$tmp" && apt-get "${sandbox[@]}" download "$dataset_pkg") >&2 ||
      { rm -rf "$tmp"; die "apt-get download $dataset_pkg failed (network? see above)"; }
    [ "$(sha256_of "$tmp/$file")" = "$sum" ] ||
      { rm -rf "$tmp"; die "$file: SHA-256 differs from the archive's $sum"; }
    extract_deb "$tmp/$file" "$tmp/x"
    rm -rf "$cut"
    mkdir -p "$cut"
    local n
    for f in "${dataset_files[@]}"; do
      case "$f" in train-*) n=$fmnist_cut_train ;; *) n=$fmnist_cut_test ;; esac
      fmnist_cut_file "$tmp/x/$dataset_rel/$f" "$cut/$f" "$n" ||
        { rm -rf "$tmp" "$cut"; die "cutting $f of $file failed"; }
    done
    rm -rf "$tmp"
    echo "$stamp" >"$cut/SOURCE"
    note "cut $dataset_pkg ($file) to $fmnist_cut_train training and $fmnist_cut_test test examples: $cut"
  fi
  for f in "${dataset_files[@]}"; do
    echo "$fmnist_cut_dir $fmnist_cut_dir/$f $(stat -c %s "$cut/$f") $(sha256_of "$cut/$f")"
  done
}

do_fetch() {
  [ $# -eq 1 ] || usage
  command -v apt-get >/dev/null || die "fetch needs apt-get (a Debian 12 machine); here there is none"
  local arch
  arch=$(dpkg --print-architecture)
  [ "$arch" = amd64 ] || die "fetch downloads this machine's architecture ($arch); the GPU machine is amd64: fetch on an amd64 Debian 12 machine"
  if ! grep -q '^VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null; then
    note "warning: this is not Debian 12 (bookworm): $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-unknown}");"
    note "warning: its libraries may need a newer glibc than the GPU machine has"
  fi
  local dir
  dir=$(abspath "$1")
  mkdir -p "$dir"

  local plan
  if ! plan=$(print_uris) || ! grep -q "^'" <<<"$plan"; then
    if [ "$(id -u)" -eq 0 ]; then
      note "apt knows no candidate for some package; running apt-get update"
      apt-get update >&2 || die "apt-get update failed (no network?)"
      plan=$(print_uris) || die "apt-get cannot locate every package:"$'\n'"$plan"
    else
      die "apt-get cannot locate every package (run 'apt-get update' as root, then fetch again):"$'\n'"$plan"
    fi
  fi
  local n_plan
  n_plan=$(grep -c "^'" <<<"$plan" || true)
  [ "$n_plan" -eq $((${#packages[@]} + 1)) ] ||
    die "apt-get planned $n_plan files for $((${#packages[@]} + 1)) packages:"$'\n'"$plan"

  local sandbox=()
  # As root, apt downloads as user _apt, who may not be able to write DIR.
  [ "$(id -u)" -ne 0 ] || sandbox=(-o APT::Sandbox::User=root)
  local manifest="" uri file size sum name got=0 kept=0
  # A whole data set package from an earlier fetch is no longer carried.
  rm -f "$dir/${dataset_pkg}"_*.deb
  while read -r uri file size sum; do
    uri=${uri//\'/}
    sum=${sum#SHA256:}
    name=${file%%_*}
    [ ${#sum} -eq 64 ] || die "apt-get gave no SHA-256 for $file ($sum)"
    if [ "$name" = "$dataset_pkg" ]; then
      local rows
      rows=$(fetch_dataset_cut "$dir" "$file" "$sum" "${sandbox[@]+"${sandbox[@]}"}") || exit 1
      manifest+="$rows"$'\n'
      continue
    fi
    # Other versions of the same package (an earlier fetch before an update) would be
    # unpacked too: keep exactly one file per package.
    local old
    for old in "$dir/${name}"_*.deb; do
      [ -e "$old" ] && [ "$(basename "$old")" != "$file" ] && { note "removing stale $(basename "$old")"; rm -f "$old"; }
    done
    if [ -f "$dir/$file" ] && [ "$(sha256_of "$dir/$file")" = "$sum" ]; then
      kept=$((kept + 1))
    else
      rm -f "$dir/$file"
      (cd "$dir" && apt-get "${sandbox[@]}" download "$name") >&2 ||
        die "apt-get download $name failed (network? see above)"
      [ -f "$dir/$file" ] || die "apt-get download $name did not write $file"
      [ "$(sha256_of "$dir/$file")" = "$sum" ] || die "$file: SHA-256 differs from the archive's $sum"
      got=$((got + 1))
    fi
    manifest+="$name $file $size $sum"$'\n'
  done < <(grep "^'" <<<"$plan")
  printf '# scripts/gpu_deps.sh fetch, %s: package file bytes sha256\n%s' \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$manifest" >"$dir/MANIFEST"
  exclude_from_git "$dir"
  # The same list, tracked: what a GPU call carries is counted from it where the fetched
  # folder is absent (CI: scripts/gpu_session.sh payload, test scripts.payload_fits).
  local repo_root
  repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  if ! cmp -s "$dir/MANIFEST" "$repo_root/scripts/gpu_deps.manifest" 2>/dev/null; then
    grep -v '^#' "$dir/MANIFEST" | cmp -s - <(grep -v '^#' "$repo_root/scripts/gpu_deps.manifest" 2>/dev/null) ||
      { cp "$dir/MANIFEST" "$repo_root/scripts/gpu_deps.manifest"
        note "scripts/gpu_deps.manifest updated (commit it: the payload check counts it)"; }
  fi
  note "fetched $got, kept $kept already there: ${#packages[@]} packages in $dir"
  echo "total: $(du -ch "$dir"/*.deb "$dir/$fmnist_cut_dir"/*.gz | tail -1 | cut -f1) in $(ls "$dir"/*.deb | wc -l) .deb files and $dir/$fmnist_cut_dir"
}

# ---- install --------------------------------------------------------------------------------

# Unpack one .deb into PREFIX: dpkg-deb where there is one, else ar + tar.
extract_deb() {
  local deb=$1 prefix=$2
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$deb" "$prefix" || die "dpkg-deb -x $deb failed (corrupt file?)"
    return
  fi
  command -v ar >/dev/null || die "neither dpkg-deb nor ar (binutils) is here to unpack $deb"
  local member
  member=$(ar t "$deb" | grep '^data\.tar') || die "$deb: no data.tar member (not a .deb?)"
  case "$member" in
    *.xz) ar p "$deb" "$member" | tar -xJ -C "$prefix" ;;
    *.zst) ar p "$deb" "$member" | zstd -dc | tar -x -C "$prefix" ;;
    *.gz) ar p "$deb" "$member" | tar -xz -C "$prefix" ;;
    *) ar p "$deb" "$member" | tar -x -C "$prefix" ;;
  esac || die "unpacking $member of $deb failed"
}

# Point a pkg-config file at PREFIX: variables and -I/-L flags holding absolute paths
# (Debian's are /usr/...; OpenBLAS's libdir and includedir are absolute, not ${prefix}-based).
# Values already under PREFIX are left alone, so running it twice changes nothing.
fix_pc() {
  local pc=$1 prefix=$2 tmp
  tmp=$(mktemp "$pc.XXXXXX")
  awk -v P="$prefix" '
    function fix(path) { return (index(path, P "/") == 1 || path == P) ? path : P path }
    /^[A-Za-z0-9_.]+=\// {
      eq = index($0, "="); print substr($0, 1, eq) fix(substr($0, eq + 1)); next
    }
    /^(Libs|Libs\.private|Cflags|Cflags\.private):/ {
      line = ""; n = split($0, w, " ")
      for (i = 1; i <= n; i++) {
        if (w[i] ~ /^-[IL]\//) w[i] = substr(w[i], 1, 2) fix(substr(w[i], 3))
        line = line (i > 1 ? " " : "") w[i]
      }
      print line; next
    }
    { print }' "$pc" >"$tmp" || { rm -f "$tmp"; die "rewriting $pc failed"; }
  mv "$tmp" "$pc"
}

# True when the host's loader already finds a real ELF file for soname $1.
host_has_lib() {
  local so=$1 path ldconfig=ldconfig
  command -v ldconfig >/dev/null || ldconfig=/sbin/ldconfig
  for path in $("$ldconfig" -p 2>/dev/null | awk -v s="$so" '$1 == s { print $NF }') \
              /lib/$multiarch/"$so" /usr/lib/$multiarch/"$so" /lib64/"$so" /usr/lib64/"$so"; do
    if [ -f "$path" ] && [ "$(head -c 4 "$path" | od -An -c | tr -d ' \n')" = '177ELF' ]; then
      return 0
    fi
  done
  return 1
}

do_install() {
  [ $# -eq 2 ] || usage
  local dir prefix
  dir=$(abspath "$1")
  prefix=$(abspath "$2")
  case "$prefix" in
    / | /usr | /usr/local | /bin | /lib | /lib64 | /etc | /opt | /usr/lib | /usr/share)
      die "refusing to unpack into $prefix: give a folder of its own, e.g. /tmp/detrain-deps" ;;
  esac
  # The prefix is written into pkg-config files and a shell script: keep it plain.
  [[ "$prefix" =~ ^/[A-Za-z0-9_./+-]+$ ]] ||
    die "PREFIX '$prefix' has characters other than letters, digits and _ . / + -"
  [ -d "$dir" ] || die "no such folder: $dir (run 'scripts/gpu_deps.sh fetch $1' where apt works)"
  local debs=("$dir"/*.deb)
  [ -e "${debs[0]}" ] || die "no .deb files in $dir"
  case "$prefix/" in "$dir/"*) die "PREFIX must not lie inside DIR ($dir)" ;; esac

  # The files must be the ones fetched: a carried folder can be cut short.
  if [ -f "$dir/MANIFEST" ]; then
    local name file size sum bad=0
    while read -r name file size sum; do
      case "$name" in '#'* | '') continue ;; esac
      if [ ! -f "$dir/$file" ]; then
        note "missing: $file ($name)"; bad=1
      elif [ "$(sha256_of "$dir/$file")" != "$sum" ]; then
        note "corrupt: $file (SHA-256 differs from MANIFEST)"; bad=1
      fi
    done <"$dir/MANIFEST"
    [ $bad -eq 0 ] || die "$dir does not match its MANIFEST; fetch again"
  else
    note "warning: no $dir/MANIFEST; unpacking the .debs unchecked"
  fi

  local glibc
  glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}') || glibc=""
  if [ -n "$glibc" ] && [ "$(printf '%s\n2.36\n' "$glibc" | sort -V | head -1)" != 2.36 ]; then
    note "WARNING: glibc $glibc is older than Debian 12's 2.36; the unpacked libraries may not load"
  fi

  mkdir -p "$prefix"
  local deb
  for deb in "${debs[@]}"; do
    extract_deb "$deb" "$prefix"
  done
  # The part of Fashion-MNIST fetch kept (checked against MANIFEST above).
  if [ -d "$dir/$fmnist_cut_dir" ]; then
    rm -rf "$prefix/$fmnist_cut_dir"
    cp -r "$dir/$fmnist_cut_dir" "$prefix/$fmnist_cut_dir"
  fi
  # Absolute symlinks would point into the host's /: re-point them into PREFIX.
  local link target
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    case "$target" in
      "$prefix"/*) ;;
      /*) ln -sfn "$prefix$target" "$link" ;;
    esac
  done < <(find "$prefix" -type l -print0)

  local pcdirs=() pc d
  while IFS= read -r -d '' pc; do
    fix_pc "$pc" "$prefix"
    d=$(dirname "$pc")
    case " ${pcdirs[*]-} " in *" $d "*) ;; *) pcdirs+=("$d") ;; esac
  done < <(find "$prefix/usr" -name '*.pc' -path '*/pkgconfig/*' -print0 | sort -z)

  # pkg-config: Debian's pkgconf, started with its own library beside it.
  local pkgconf_bin=$prefix/usr/bin/pkgconf
  mkdir -p "$prefix/bin"
  if [ -x "$pkgconf_bin" ]; then
    cat >"$prefix/bin/pkg-config" <<EOF
#!/bin/sh
# pkg-config for the Debian 12 packages unpacked here by scripts/gpu_deps.sh: Debian's
# pkgconf, with its libpkgconf from the same folder.
LD_LIBRARY_PATH='$prefix/usr/lib/$multiarch'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH} exec '$pkgconf_bin' "\$@"
EOF
    chmod +x "$prefix/bin/pkg-config"
  fi

  # Shared libraries the host's loader cannot find: link them into one folder for
  # LD_LIBRARY_PATH (libgfortran for libopenblas, say). Those the host has stay the host's.
  rm -rf "$prefix/runtime-lib"
  mkdir -p "$prefix/runtime-lib"
  local lib so linked=() host=()
  while IFS= read -r -d '' lib; do
    so=$(basename "$lib")
    if host_has_lib "$so"; then
      host+=("$so")
    else
      ln -sfn "$lib" "$prefix/runtime-lib/$so"
      linked+=("$so")
    fi
  done < <(find "$prefix/usr/lib" "$prefix/lib" -regextype posix-extended \
                -regex '.*/lib[^/]*\.so\.[0-9]+' -print0 2>/dev/null | sort -z)

  # What must be there now: a missing one names the package to fetch.
  local -A need=(
    [usr/include/yaml.h]="package libyaml-dev"
    [usr/include/$multiarch/openblas-pthread/cblas.h]="package libopenblas-pthread-dev"
    [usr/include/openssl/evp.h]="package libssl-dev"
    [usr/include/$multiarch/openssl/configuration.h]="package libssl-dev"
    [usr/include/zlib.h]="package zlib1g-dev"
    [usr/lib/$multiarch/libgfortran.so.5]="package libgfortran5"
    [bin/pkg-config]="package pkgconf-bin"
    [$fmnist_cut_dir/train-images-idx3-ubyte.gz]="the cut of $dataset_pkg that fetch makes"
    [$fmnist_cut_dir/train-labels-idx1-ubyte.gz]="the cut of $dataset_pkg that fetch makes"
    [$fmnist_cut_dir/t10k-images-idx3-ubyte.gz]="the cut of $dataset_pkg that fetch makes"
    [$fmnist_cut_dir/t10k-labels-idx1-ubyte.gz]="the cut of $dataset_pkg that fetch makes"
  )
  local f missing=0
  for f in "${!need[@]}"; do
    [ -e "$prefix/$f" ] || { note "missing after unpacking: $prefix/$f (${need[$f]})"; missing=1; }
  done
  [ $missing -eq 0 ] || die "the .debs in $dir lack files detrain needs; fetch again"

  local pkg_path
  pkg_path=$(IFS=:; echo "${pcdirs[*]}")
  local versions
  versions=$(PKG_CONFIG_LIBDIR=$pkg_path "$prefix/bin/pkg-config" --modversion yaml-0.1 openblas libcrypto zlib 2>&1) ||
    die "pkg-config cannot read the unpacked .pc files: $versions"

  local host_pkgconfig=yes
  pkg-config --version >/dev/null 2>&1 || host_pkgconfig=no # absent, or not working

  local env=$prefix/env.sh
  {
    echo "# Written by scripts/gpu_deps.sh install $(date -u +%Y-%m-%dT%H:%M:%SZ): Debian 12 packages"
    echo "# unpacked in $prefix. Source it (. $env) before configuring, building"
    echo "# or running detrain. Sourcing it twice adds nothing twice."
    cat <<'EOF_FN'
dt_deps_prepend() { # VAR DIR: put DIR first in $VAR unless it is already there
  local cur
  eval "cur=\${$1:-}"
  case ":$cur:" in
    *":$2:"*) ;;
    *) export "$1=$2${cur:+:$cur}" ;;
  esac
}
EOF_FN
    echo "export DT_DEPS_PREFIX='$prefix'"
    local i
    for ((i = ${#pcdirs[@]} - 1; i >= 0; i--)); do
      echo "dt_deps_prepend PKG_CONFIG_PATH '${pcdirs[$i]}'"
    done
    echo "dt_deps_prepend CMAKE_PREFIX_PATH '$prefix/usr'"
    echo "# Debian's multiarch headers (openssl/configuration.h): no .pc file names this folder."
    echo "dt_deps_prepend CPATH '$prefix/usr/include/$multiarch'"
    echo "export OPENSSL_ROOT_DIR='$prefix/usr'"
    echo "# Only the shared libraries the host lacks: ${linked[*]:-none}."
    echo "dt_deps_prepend LD_LIBRARY_PATH '$prefix/runtime-lib'"
    if [ $host_pkgconfig = no ]; then
      echo "# The host has no pkg-config: Debian's pkgconf."
      echo "dt_deps_prepend PATH '$prefix/bin'"
    fi
    echo "# Fashion-MNIST for detrain (harness/setup/data.c: dataset.path, else \$DETRAIN_DATA): its"
    echo "# first $fmnist_cut_train training and $fmnist_cut_test test examples (scripts/fmnist_cut.sh)."
    echo "export DETRAIN_DATA='$prefix/$fmnist_cut_dir'"
    echo "unset -f dt_deps_prepend"
  } >"$env"

  note "unpacked ${#debs[@]} packages into $prefix"
  note "versions (yaml-0.1 openblas libcrypto zlib): $(echo $versions)"
  note "runtime-lib (host lacks): ${linked[*]:-none}; the host's own: ${host[*]:-none}"
  [ $host_pkgconfig = yes ] || note "no pkg-config on this host: env.sh puts $prefix/bin on PATH"
  echo "# . $env   # does, in effect:"
  sed -n -e "/^export /p" \
         -e "s/^dt_deps_prepend \([A-Z_]*\) '\(.*\)'$/export \1='\2'\${\1:+:\$\1}/p" "$env"
}

[ $# -ge 1 ] || usage
mode=$1
shift
case "$mode" in
  fetch) do_fetch "$@" ;;
  install) do_install "$@" ;;
  -h | --help | help) usage ;;
  *) note "unknown mode '$mode'"; usage ;;
esac
