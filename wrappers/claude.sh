#!/usr/bin/env bash
# claude.sh: one Claude Code turn, its stream-json on stdout, then the runwire status line.
# Contract: spec/WRAPPER-CONTRACT.md. Run with --help for the flags.
set -euo pipefail

RW_NAME=claude.sh
RW_ENGINE=claude
RW_BIN_VAR=RUNWIRE_CLAUDE_BIN
RW_INTERACTIVE=1
# The init line (session id) and the result line (how the turn ended).
RW_MARKS='"subtype"[[:space:]]*:[[:space:]]*"init"|"type"[[:space:]]*:[[:space:]]*"result"'

# shellcheck source-path=SCRIPTDIR source=_common.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/_common.sh"

rw_session_flag_ok() { return 0; }

rw_validate() {
    if [[ -n $RW_SESSION_ID ]] && ! rw_is_uuid "$RW_SESSION_ID"; then
        rw_usage_error "--session-id must be a UUID for claude, got '$RW_SESSION_ID'"
    fi
}

rw_prepare() {
    if ((RW_LIVE)); then
        rw_prepare_interactive
        return 0
    fi
    RW_ARGV=(-p --output-format stream-json --verbose --include-partial-messages)
    if [[ -n $RW_RESUME ]]; then
        RW_ARGV+=(--resume "$RW_RESUME")
    else
        [[ -n $RW_SESSION_ID ]] || RW_SESSION_ID=$(rw_new_uuid)
        RW_ARGV+=(--session-id "$RW_SESSION_ID")
    fi
    # `--` so that a prompt starting with '-' is not read as a flag.
    RW_ARGV+=(-- "$RW_PROMPT")
}

# --interactive: runwire-session runs claude in its interactive protocol (it adds
# the stream-json and permission-prompt flags) with our stdin as the session input;
# the prompt is the first message.
rw_prepare_interactive() {
    rw_session_engine
    RW_ARGV=(claude --prompt "$RW_PROMPT" --permission-mode "${RUNWIRE_PERMISSION_MODE:-default}"
        --plan-exit-mode "${RUNWIRE_PLAN_EXIT_MODE:-default}" --answer-timeout "${RUNWIRE_ANSWER_TIMEOUT:-300s}")
    [[ ${RUNWIRE_GRANT_ALL:-} == 1 ]] && RW_ARGV+=(--grant-all)
    [[ -n $RW_RESUME ]] && RW_ARGV+=(--resume "$RW_RESUME")
    RW_ARGV+=(-- "$RW_BIN")
    if [[ -z $RW_RESUME ]]; then
        [[ -n $RW_SESSION_ID ]] || RW_SESSION_ID=$(rw_new_uuid)
        RW_ARGV+=(--session-id "$RW_SESSION_ID")
    fi
    RW_BIN=$RW_SESSION_ENGINE
}

rw_judge() {
    local line init="" result=""
    if [[ -s $RW_TMP/marks ]]; then
        while IFS= read -r line || [[ -n $line ]]; do
            if rw_has "$line" type result; then
                result=$line
            elif [[ -z $init ]] && rw_has "$line" type system && rw_has "$line" subtype init; then
                init=$line
            fi
        done <"$RW_TMP/marks"
    fi
    # Only an init line proves the session exists: a failed --resume prints a result
    # carrying the id it was asked for, and no init.
    [[ -n $init ]] && RW_SESSION=$(rw_field "$init" session_id)
    if [[ -z $result ]]; then
        RW_TURN_OK=0
        RW_TURN_DETAIL="stream ended without a result line"
        return 0
    fi
    local is_error sub reason msg
    is_error=$(rw_lit "$result" is_error)
    sub=$(rw_field "$result" subtype)
    reason=$(rw_field "$result" terminal_reason)
    if [[ $is_error != true && $sub == success && ( -z $reason || $reason == completed ) ]]; then
        RW_TURN_OK=1
        RW_TURN_DETAIL="turn completed"
        return 0
    fi
    RW_TURN_OK=0
    msg=""
    local re='"errors"[[:space:]]*:[[:space:]]*\[[[:space:]]*"(([^"\\]|\\.)*)"'
    if [[ $result =~ $re ]]; then
        msg=$(rw_unescape "${BASH_REMATCH[1]}")
    else
        msg=$(rw_unescape "$(rw_field "$result" result)")
    fi
    RW_TURN_DETAIL="turn failed (subtype ${sub:-?}, is_error ${is_error:-?}${reason:+, terminal_reason $reason})${msg:+: $msg}"
}

rw_main "$@"
