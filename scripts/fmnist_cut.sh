# The part of Fashion-MNIST a GPU call carries (sourced by scripts/gpu_deps.sh,
# scripts/cross_device.sh and scripts/gpu_session.sh; issue 48 item 5).
#
# The whole data set is 30.9 MB as Debian's package, more than half of what a GPU call may
# carry. The GPU runs read few examples (100 steps of 256 at most), so the call carries the
# first fmnist_cut_train training and fmnist_cut_test test examples (5.2 MB gzipped), and
# every run whose bits a GPU run is compared with -- the committed CPU references of
# results/cpu/crossdev-t1|t2 -- trains on the same examples: `fmnist_cut_sets` sets
# dataset.train_limit and dataset.test_limit (harness/setup/data.c keeps the first N), which
# on the full files and on the cut ones gives the same examples, so the same bits.

fmnist_cut_train=10000
fmnist_cut_test=2000
fmnist_cut_sets=(--set "dataset.train_limit=$fmnist_cut_train" --set "dataset.test_limit=$fmnist_cut_test")
fmnist_cut_dir=fashion-mnist-cut # the folder scripts/gpu_deps.sh fetch writes in its DIR

# fmnist_cut_file SRC.gz DST.gz N: the first N records of an IDX file (gzipped), the count in
# its header set to N. Images (idx3) have a 16-byte header and 28 x 28-byte records, labels
# (idx1) an 8-byte header and 1-byte records; the header's first dimension is bytes 4-7, big
# endian. gzip -n: no name or time, so the same input gives the same bytes.
fmnist_cut_file() {
  local src=$1 dst=$2 n=$3 head rec magic have
  # gzip -dc into head: gzip dies of SIGPIPE, which pipefail and set -e must not see
  unz() { gzip -dc "$src" 2>/dev/null || true; }
  magic=$(unz | head -c 4 | od -An -tx1 | tr -d ' \n')
  case "$magic" in
    00000803) head=16 rec=784 ;;
    00000801) head=8 rec=1 ;;
    *) echo "fmnist_cut_file: $src: not an IDX image or label file (magic '$magic')" >&2; return 1 ;;
  esac
  have=$(unz | head -c 8 | tail -c 4 | od -An -tu1 |
         awk '{ print (($1 * 256 + $2) * 256 + $3) * 256 + $4 }')
  [ "${have:-0}" -ge "$n" ] || { echo "fmnist_cut_file: $src holds ${have:-no} records, fewer than $n" >&2; return 1; }
  {
    unz | head -c 4
    printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(((n >> 24) & 255)) $(((n >> 16) & 255)) \
                $(((n >> 8) & 255)) $((n & 255)))"
    unz | tail -c +9 | head -c $((head - 8 + n * rec)) || true # (tail's SIGPIPE)
  } | gzip -9n >"$dst.tmp" || { rm -f "$dst.tmp"; return 1; }
  [ "$(gzip -dc "$dst.tmp" | wc -c)" -eq $((head + n * rec)) ] ||
    { echo "fmnist_cut_file: $dst: short output" >&2; rm -f "$dst.tmp"; return 1; }
  mv "$dst.tmp" "$dst"
}
