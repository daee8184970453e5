# Shell functions shared by scripts/gpu_session.sh and scripts/cross_device.sh (sourced).

# The command line as one would type it: plain words bare, others in single quotes.
quote_args() {
  local a out=""
  for a in "$@"; do
    if [[ "$a" =~ ^[A-Za-z0-9_./=:,+@%-]+$ ]]; then
      out+=" $a"
    else
      out+=" '${a//\'/\'\\\'\'}'"
    fi
  done
  echo "${out# }"
}
