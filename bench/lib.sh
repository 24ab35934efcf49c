# shellcheck shell=bash
# bench/lib.sh: what the bench scripts share; sourced after they set $root.
: "${root:?bench/lib.sh: set root (the checkout) before sourcing it}"

die() {
  echo "bench: $*" >&2
  exit 1
}

# bench_bin CARGO_ARGS...: sets $bin, the directory of the release binaries:
# $RUNWIRE_BIN when set, else cargo's target after `cargo build --release CARGO_ARGS`.
bench_bin() {
  if [ -n "${RUNWIRE_BIN:-}" ]; then
    # shellcheck disable=SC2034 # $bin is what the caller asked for
    bin=$(cd "$RUNWIRE_BIN" && pwd)
    return
  fi
  echo "bench: cargo build --release $*" >&2
  (cd "$root" && cargo build --quiet --release "$@")
  local target=${CARGO_TARGET_DIR:-$root/target}
  case "$target" in /*) ;; *) target="$root/$target" ;; esac
  # shellcheck disable=SC2034 # $bin is what the caller asked for
  bin="$target/release"
}
