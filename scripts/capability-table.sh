#!/usr/bin/env bash
# Writes the real-agent matrix's capability table (`runs doctor --capabilities`,
# rendered from realagents/capabilities.json and realagents/tested.json) between
# the markers <!-- capability-table:begin --> and <!-- capability-table:end -->
# of each FILE (default: docs/REAL-AGENTS.md and README.md); a file without
# both markers is left as it is. tests/it/doctor.rs checks that they hold exactly
# this table.
#
# Usage: scripts/capability-table.sh [FILE...]
# Environment: RUNS, the runs binary to render with (default: cargo run --bin runs).
# Exit status: 0 done; 1 the table could not be rendered or a file written.
set -euo pipefail

root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
if (($# == 0)); then
    set -- "$root/docs/REAL-AGENTS.md" "$root/README.md"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/capability-table.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT

if [[ -n ${RUNS:-} ]]; then
    "$RUNS" doctor --capabilities >"$tmp/table"
else
    cargo run --quiet --manifest-path "$root/Cargo.toml" --bin runs -- doctor --capabilities >"$tmp/table"
fi
[[ -s $tmp/table ]] || {
    echo "capability-table.sh: runs doctor --capabilities printed nothing" >&2
    exit 1
}

begin='<!-- capability-table:begin -->'
end='<!-- capability-table:end -->'
for f in "$@"; do
    if ! grep -qxF -- "$begin" "$f" || ! grep -qxF -- "$end" "$f"; then
        echo "capability-table.sh: $f: no markers, left as it is" >&2
        continue
    fi
    awk -v begin="$begin" -v end="$end" -v table="$tmp/table" '
        $0 == begin { print; while ((getline l < table) > 0) print l; skip = 1; next }
        $0 == end { skip = 0 }
        !skip { print }
    ' "$f" >"$tmp/out"
    if ! cmp -s "$tmp/out" "$f"; then
        # Written in place: the file keeps its mode and owner.
        cat "$tmp/out" >"$f"
        echo "capability-table.sh: $f: table written" >&2
    fi
done
