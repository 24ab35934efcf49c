#!/usr/bin/env bash
# codex.sh: one `codex exec --json` turn (the review seat: its verdict is the final
# agent_message), the JSON lines on stdout, then the runwire status line.
# Contract: spec/WRAPPER-CONTRACT.md. Run with --help for the flags.
set -euo pipefail

RW_NAME=codex.sh
RW_ENGINE=codex
RW_BIN_VAR=RUNWIRE_CODEX_BIN
RW_INTERACTIVE=1
# thread.started (the session id) and the turn's end.
RW_MARKS='"type"[[:space:]]*:[[:space:]]*"(thread\.started|turn\.completed|turn\.failed)"'

# shellcheck source-path=SCRIPTDIR source=_common.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/_common.sh"

# codex makes its own thread ids; it cannot take one.
rw_session_flag_ok() { return 1; }

rw_prepare() {
    if ((RW_LIVE)); then
        rw_prepare_interactive
        return 0
    fi
    # codex exec refuses a directory that is neither a git work tree nor trusted in
    # its config; passing over that check is the caller's choice, never ours.
    local skip=()
    [[ ${RUNWIRE_CODEX_SKIP_GIT_REPO_CHECK:-} == 1 ]] && skip=(--skip-git-repo-check)
    if [[ -n $RW_RESUME ]]; then
        RW_ARGV=(exec resume --json ${skip[@]+"${skip[@]}"} -- "$RW_RESUME" "$RW_PROMPT")
    else
        RW_ARGV=(exec --json ${skip[@]+"${skip[@]}"} -- "$RW_PROMPT")
    fi
}

# --interactive: runwire-session runs `codex app-server` (it appends `app-server`)
# with our stdin as the session input; the prompt is the first message. The
# outcome is read from the JSON-RPC stream: the thread (its start or resume
# response, or thread/started) and the last turn/completed.
rw_prepare_interactive() {
    rw_session_engine
    RW_ARGV=(codex --prompt "$RW_PROMPT" --answer-timeout "${RUNWIRE_ANSWER_TIMEOUT:-300s}"
        --sandbox "${RUNWIRE_SANDBOX:-workspace-write}" --approval-policy "${RUNWIRE_APPROVAL_POLICY:-on-request}")
    [[ ${RUNWIRE_GRANT_ALL:-} == 1 ]] && RW_ARGV+=(--grant-all)
    [[ -n $RW_RESUME ]] && RW_ARGV+=(--resume "$RW_RESUME")
    RW_ARGV+=(-- "$RW_BIN")
    RW_BIN=$RW_SESSION_ENGINE
    RW_MARKS='"thread"[[:space:]]*:[[:space:]]*\{[[:space:]]*"id"|"method"[[:space:]]*:[[:space:]]*"turn/completed"'
}

rw_judge_interactive() {
    local line thread="" end="" re status
    if [[ -s $RW_TMP/marks ]]; then
        while IFS= read -r line || [[ -n $line ]]; do
            if rw_has "$line" method turn/completed; then
                end=$line
            elif [[ -z $thread ]]; then
                thread=$line
            fi
        done <"$RW_TMP/marks"
    fi
    # The thread's id is the first string "id" of its line (a response's own id is a number).
    [[ -n $thread ]] && RW_SESSION=$(rw_field "$thread" id)
    [[ -n $RW_SESSION ]] || RW_SESSION=$RW_RESUME
    # The turn's own status comes right before its error (its items have statuses too).
    re='"status"[[:space:]]*:[[:space:]]*"([A-Za-z]+)"[[:space:]]*,[[:space:]]*"error"'
    status=""
    [[ $end =~ $re ]] && status=${BASH_REMATCH[1]}
    case $status in
        completed)
            RW_TURN_OK=1
            RW_TURN_DETAIL="session ended; its last turn completed"
            ;;
        "")
            RW_TURN_OK=0
            RW_TURN_DETAIL="session ended without a completed turn"
            ;;
        *)
            RW_TURN_OK=0
            RW_TURN_DETAIL="last turn $status: $(rw_unescape "$(rw_field "$end" message)")"
            ;;
    esac
}

rw_judge() {
    if ((RW_LIVE)); then
        rw_judge_interactive
        return 0
    fi
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
