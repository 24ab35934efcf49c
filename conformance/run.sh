#!/usr/bin/env bash
# conformance/run.sh: every fixture through the whole pipeline, then through
# the official AG-UI 1.0.0 client (check.mjs).
#
# For each fixtures/<adapter>/*.jsonl (adapter = claude, cursor or codex, from
# the directory name) it runs
#   normalize-events <adapter> --input F | agui-translate | sse-encode > F.sse
# and checks all the SSE files with check.mjs, and every intermediate events/v1
# stream against spec/events.schema.json with check-events.mjs. Golden files kept beside the
# fixtures (*.events.jsonl, *.agui.jsonl, *.expected.jsonl, *.golden.jsonl,
# *.out.jsonl) are not inputs and are skipped.
#
# Binaries: from the directory $RUNWIRE_BIN when set; otherwise built with
# `cargo build --bins` (profile $RUNWIRE_PROFILE, default dev: it reuses what
# `cargo test` built) and taken from $CARGO_TARGET_DIR (default target/).
#
# Exit codes: normalize-events may exit 1 (it skipped input lines: some
# fixtures carry noise on purpose); any other non-zero stage status fails the
# fixture. Prints `conformance: N passed, M failed` and exits 1 on any failure
# or when there is no fixture at all. Skips (exit 0) only when node is absent.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# RUNWIRE_CONFORMANCE_DIR: a copy of this directory with other client
# versions installed (conformance/newer.sh), checked the same way.
conf=${RUNWIRE_CONFORMANCE_DIR:-$root/conformance}

if ! command -v node >/dev/null 2>&1; then
  echo "conformance: skipped: node is not installed (the checker runs the official AG-UI TypeScript client)"
  exit 0
fi

if [ ! -d "$conf/node_modules/@ag-ui/client" ]; then
  echo "conformance: installing the checker's packages (npm ci)"
  (cd "$conf" && npm ci --no-audit --no-fund --loglevel=error)
fi

if [ -n "${RUNWIRE_BIN:-}" ]; then
  bin=$(cd "$RUNWIRE_BIN" && pwd)
else
  profile=${RUNWIRE_PROFILE:-dev}
  case "$profile" in
    dev | debug) dir=debug; profile=dev ;;
    *) dir=$profile ;;
  esac
  echo "conformance: cargo build --bins --profile $profile"
  (cd "$root" && cargo build --quiet --bins --profile "$profile")
  target=${CARGO_TARGET_DIR:-$root/target}
  case "$target" in /*) ;; *) target="$root/$target" ;; esac
  bin="$target/$dir"
fi
for b in normalize-events agui-translate sse-encode; do
  if [ ! -x "$bin/$b" ]; then
    echo "conformance: $bin/$b: no such executable" >&2
    echo "conformance: 0 passed, 1 failed"
    exit 1
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/runwire-conformance.XXXXXX")
keep=0
cleanup() { if [ "$keep" -eq 0 ]; then rm -rf "$work"; fi; }
trap cleanup EXIT

passed=0
failed=0
sse=()
events=()
shopt -s nullglob
for adapter in claude cursor codex; do
  for f in "$root/fixtures/$adapter"/*.jsonl; do
    name=$(basename "$f" .jsonl)
    case "$name" in
      *.events | *.agui | *.expected | *.golden | *.out) continue ;;
    esac
    mkdir -p "$work/$adapter"
    out="$work/$adapter/$name.sse"
    err="$work/$adapter/$name.stderr"
    ev="$work/$adapter/$name.events.jsonl"
    set +e
    "$bin/normalize-events" "$adapter" --input "$f" 2>"$err" | tee "$ev" | "$bin/agui-translate" 2>>"$err" | "$bin/sse-encode" >"$out" 2>>"$err"
    rc=("${PIPESTATUS[@]}")
    set -e
    events+=("$ev")
    if [ "${rc[0]}" -gt 1 ] || [ "${rc[2]}" -ne 0 ] || [ "${rc[3]}" -ne 0 ]; then
      failed=$((failed + 1))
      keep=1
      echo "FAIL fixtures/$adapter/$name.jsonl: pipeline exit statuses normalize-events=${rc[0]} agui-translate=${rc[2]} sse-encode=${rc[3]}"
      sed 's/^/     /' "$err" | head -n 20
      continue
    fi
    sse+=("$out")
  done
done

# check_with SCRIPT REPORT FILE...: runs a checker over the files (paths
# relative to $work), tallies its one-line-per-file verdicts, and counts every
# file it did not report on (a crashed checker) as a failure.
check_with() {
  local script=$1 report=$2 line checked
  shift 2
  [ "$#" -gt 0 ] || return 0
  set +e
  (cd "$work" && node "$conf/$script" "${@#"$work"/}") >"$work/$report"
  set -e
  while IFS= read -r line; do
    if printf '%s' "$line" | grep -q '"ok":true'; then
      passed=$((passed + 1))
      printf 'ok   %s\n' "$line"
    else
      failed=$((failed + 1))
      keep=1
      printf 'FAIL %s\n' "$line"
    fi
  done <"$work/$report"
  checked=$(wc -l <"$work/$report")
  if [ "$checked" -ne "$#" ]; then
    failed=$((failed + $# - checked))
    keep=1
    echo "FAIL $script reported $checked of $# files"
  fi
}

check_with check.mjs check.jsonl "${sse[@]}"
# The intermediate events/v1 stream must satisfy its own contract too.
check_with check-events.mjs check-events.jsonl "${events[@]}"

if [ $((passed + failed)) -eq 0 ]; then
  echo "conformance: no fixture found under fixtures/{claude,cursor,codex}/*.jsonl" >&2
  failed=1
fi
if [ "$keep" -eq 1 ]; then
  echo "conformance: outputs kept in $work"
fi
echo "conformance: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
