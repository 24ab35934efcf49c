#!/usr/bin/env bash
# cursor.sh: one cursor-agent turn, its stream-json on stdout, then the runwire status line.
# Contract: spec/WRAPPER-CONTRACT.md. Run with --help for the flags.
set -euo pipefail

RW_NAME=cursor.sh
RW_ENGINE=cursor-agent
RW_BIN_VAR=RUNWIRE_CURSOR_BIN
RW_INTERACTIVE=1
# The init line (session id) and the result line (how the turn ended).
RW_MARKS='"subtype"[[:space:]]*:[[:space:]]*"init"|"type"[[:space:]]*:[[:space:]]*"result"'

# shellcheck source-path=SCRIPTDIR source=_common.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/_common.sh"

# cursor-agent makes its own chat ids (create-chat); it cannot take one.
rw_session_flag_ok() { return 1; }

RW_CREATED=""

rw_prepare() {
    if ((RW_LIVE)); then
        rw_prepare_interactive
        return 0
    fi
    local chat=$RW_RESUME
    if [[ -z $chat ]]; then
        rw_run "$RW_TMP/create-chat.out" create-chat
        if ((RW_RC != 0 || RW_TIMED_OUT)) || [[ -n $RW_STOP_SIGNAL ]]; then
            RW_TURN_DETAIL="create-chat failed"
            return 1
        fi
        chat=$(tr -d '[:space:]' <"$RW_TMP/create-chat.out")
        if [[ ! $chat =~ ^[A-Za-z0-9][A-Za-z0-9._:-]*$ ]]; then
            RW_TURN_OK=0
            RW_TURN_DETAIL="create-chat printed no chat id"
            return 1
        fi
        RW_CREATED=$chat
        # The chat exists from here on, whatever the turn does.
        RW_SESSION=$chat
    fi
    RW_ARGV=(--print --output-format stream-json --stream-partial-output --resume "$chat" -- "$RW_PROMPT")
}

# --interactive: runwire-session runs `cursor-agent acp` (it appends `acp`) with
# our stdin as the session input; the prompt is the first message. ACP makes
# the session (session/new) itself: no create-chat. The outcome is read from
# the JSON-RPC stream: session/new's sessionId and the last stopReason.
rw_prepare_interactive() {
    rw_session_engine
    RW_ARGV=(cursor --prompt "$RW_PROMPT" --answer-timeout "${RUNWIRE_ANSWER_TIMEOUT:-300s}")
    [[ -n ${RUNWIRE_ACP_MODE:-} ]] && RW_ARGV+=(--mode "$RUNWIRE_ACP_MODE")
    [[ -n $RW_RESUME ]] && RW_ARGV+=(--resume "$RW_RESUME")
    RW_ARGV+=(-- "$RW_BIN")
    RW_BIN=$RW_SESSION_ENGINE
    RW_MARKS='"(sessionId|stopReason)"[[:space:]]*:'
}

rw_judge_interactive() {
    local line created="" stop=""
    if [[ -s $RW_TMP/marks ]]; then
        while IFS= read -r line || [[ -n $line ]]; do
            if [[ $line != *'"method"'* ]] && [[ -z $created ]] && [[ -n $(rw_field "$line" sessionId) ]]; then
                created=$(rw_field "$line" sessionId)
            fi
            [[ -n $(rw_field "$line" stopReason) ]] && stop=$(rw_field "$line" stopReason)
        done <"$RW_TMP/marks"
    fi
    RW_SESSION=${RW_RESUME:-$created}
    case $stop in
        end_turn)
            RW_TURN_OK=1
            RW_TURN_DETAIL="session ended; its last turn ended end_turn"
            ;;
        "")
            RW_TURN_OK=0
            RW_TURN_DETAIL="session ended without a finished turn"
            ;;
        *)
            RW_TURN_OK=0
            RW_TURN_DETAIL="last turn stopped: $stop"
            ;;
    esac
}

rw_judge() {
    if ((RW_LIVE)); then
        rw_judge_interactive
        return 0
    fi
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
    if [[ -n $init ]]; then
        RW_SESSION=$(rw_field "$init" session_id)
        [[ -n $RW_SESSION ]] || RW_SESSION=$RW_CREATED
    fi
    if [[ -z $result ]]; then
        RW_TURN_OK=0
        RW_TURN_DETAIL="stream ended without a result line"
        return 0
    fi
    local is_error sub
    is_error=$(rw_lit "$result" is_error)
    sub=$(rw_field "$result" subtype)
    if [[ $is_error != true && $sub == success ]]; then
        RW_TURN_OK=1
        RW_TURN_DETAIL="turn completed"
    else
        RW_TURN_OK=0
        RW_TURN_DETAIL="turn failed (subtype ${sub:-?}, is_error ${is_error:-?})"
    fi
}

rw_main "$@"
