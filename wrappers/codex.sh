#!/usr/bin/env bash
# codex.sh: one `codex exec --json` turn (the review seat: its verdict is the final
# agent_message), the JSON lines on stdout, then the runwire status line.
# Contract: spec/WRAPPER-CONTRACT.md. Run with --help for the flags.
set -euo pipefail

RW_NAME=codex.sh
RW_ENGINE=codex
RW_BIN_VAR=RUNWIRE_CODEX_BIN
RW_INTERACTIVE=0
# thread.started (the session id) and the turn's end.
RW_MARKS='"type"[[:space:]]*:[[:space:]]*"(thread\.started|turn\.completed|turn\.failed)"'

# shellcheck source-path=SCRIPTDIR source=_common.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/_common.sh"

# codex makes its own thread ids; it cannot take one.
rw_session_flag_ok() { return 1; }

rw_prepare() {
    if [[ -n $RW_RESUME ]]; then
        RW_ARGV=(exec resume --json -- "$RW_RESUME" "$RW_PROMPT")
    else
        RW_ARGV=(exec --json -- "$RW_PROMPT")
    fi
}

rw_judge() {
    local line started="" end="" how=""
    if [[ -s $RW_TMP/marks ]]; then
        while IFS= read -r line || [[ -n $line ]]; do
            if rw_has "$line" type thread.started; then
                [[ -n $started ]] || started=$line
            elif rw_has "$line" type turn.completed; then
                end=$line how=turn.completed
            elif rw_has "$line" type turn.failed; then
                end=$line how=turn.failed
            fi
        done <"$RW_TMP/marks"
    fi
    [[ -n $started ]] && RW_SESSION=$(rw_field "$started" thread_id)
    case $how in
        turn.completed)
            RW_TURN_OK=1
            RW_TURN_DETAIL="turn completed; the verdict is the last agent_message"
            ;;
        turn.failed)
            RW_TURN_OK=0
            RW_TURN_DETAIL="turn failed: $(rw_unescape "$(rw_field "$end" message)")"
            ;;
        *)
            RW_TURN_OK=0
            RW_TURN_DETAIL="stream ended without turn.completed or turn.failed"
            ;;
    esac
}

rw_main "$@"
