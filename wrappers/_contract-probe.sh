#!/usr/bin/env bash
# Check wrappers/{claude,cursor,codex}.sh against spec/WRAPPER-CONTRACT.md, using the
# stub engines in fixtures/stub-engines/ (no real CLI, no account, no network).
#
#   bash wrappers/_contract-probe.sh [claude|cursor|codex ...]
#
# Prints one "ok - ..." / "not ok - ..." line per check and exits 0 only when all pass.
# Takes about 20 s (the timeout checks wait for real signals).
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
WRAPPERS=$ROOT/wrappers
STUBS=$ROOT/fixtures/stub-engines
WORK=$(mktemp -d "${TMPDIR:-/tmp}/runwire-probe.XXXXXX")
trap 'rm -rf -- "$WORK"' EXIT

# Only the stubs answer to the engine names; nothing from the caller's environment
# may change what the wrappers run.
export PATH="$STUBS:$PATH"
unset RUNWIRE_CLAUDE_BIN RUNWIRE_CURSOR_BIN RUNWIRE_CODEX_BIN RUNWIRE_KILL_GRACE
unset STUB_MODE STUB_DELAY STUB_STREAM STUB_ARGV_LOG STUB_PID_FILE STUB_CHAT_ID STUB_THREAD_ID STUB_CREATE_CHAT STUB_STDIN_CHECK

CHAT_ID=c0ffee00-0000-4000-8000-000000000001
THREAD_ID=0199a213-81c0-7800-8aa1-bbab2a035a53
SID=5e55a1d0-0000-4000-8000-00000000abcd
RESUME_ID=7e5a0b1c-1111-4222-8333-444455556666

PASS=0
FAIL=0

ok() {
    PASS=$((PASS + 1))
    printf 'ok - %s\n' "$1"
}

not_ok() {
    FAIL=$((FAIL + 1))
    printf 'not ok - %s\n' "$1"
    shift
    local l
    for l in "$@"; do printf '#   %s\n' "$l"; done
}

# run WRAPPER ARGS... with the environment already set by the caller (env VAR=.. run ..).
# Leaves OUT (stdout file), ERR (stderr file), RC, LAST (last stdout line).
run() {
    local w=$1
    shift
    OUT=$WORK/out ERR=$WORK/err
    RC=0
    "$WRAPPERS/$w.sh" "$@" >"$OUT" 2>"$ERR" || RC=$?
    LAST=$(tail -n 1 "$OUT")
}

# Parse the status line in LAST into S_OK, S_RC, S_SID (or "null"), S_DETAIL, S_FILES.
# Fails when LAST is not exactly the contract's shape.
parse_status() {
    local str='"(([^"\\]|\\.)*)"'
    local re="^\\{\"type\":\"runwire\\.status\",\"ok\":(true|false),\"rc\":([0-9]+),\"session_id\":(null|$str),\"detail\":$str,\"files\":\\[(.*)\\]\\}\$"
    [[ $LAST =~ $re ]] || return 1
    S_OK=${BASH_REMATCH[1]}
    S_RC=${BASH_REMATCH[2]}
    S_SID=${BASH_REMATCH[3]}
    [[ $S_SID == null ]] || S_SID=${BASH_REMATCH[4]}
    S_DETAIL=${BASH_REMATCH[6]}
    S_FILES=${BASH_REMATCH[8]}
    if command -v python3 >/dev/null 2>&1; then
        printf '%s\n' "$LAST" | python3 -c 'import json,sys; json.loads(sys.stdin.read())' 2>/dev/null || return 1
    fi
    return 0
}

# expect_status NAME WANT_RC WANT_SID(null|id|uuid|any)
expect_status() {
    local name=$1 want_rc=$2 want_sid=$3 why=()
    ((RC == want_rc)) || why+=("exit status $RC, want $want_rc")
    if ! parse_status; then
        why+=("last line is not the status line: ${LAST:0:300}")
    else
        ((S_RC == RC)) || why+=("status rc $S_RC != exit status $RC (detail: $S_DETAIL)")
        local want_ok=false
        ((want_rc == 0)) && want_ok=true
        [[ $S_OK == "$want_ok" ]] || why+=("ok is $S_OK, want $want_ok (detail: $S_DETAIL)")
        case $want_sid in
            any) ;;
            uuid)
                [[ $S_SID =~ ^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$ ]] ||
                    why+=("session_id '$S_SID' is not a UUID v4")
                ;;
            *) [[ $S_SID == "$want_sid" ]] || why+=("session_id '$S_SID', want '$want_sid'") ;;
        esac
        local n
        n=$(grep -c '"type":"runwire.status","ok"' "$OUT" || true)
        ((n == 1)) || why+=("$n status lines, want exactly 1")
    fi
    if ((${#why[@]})); then
        not_ok "$name" "${why[@]}" "stderr: $(head -c 600 "$ERR" | tr '\n' '|')"
    else
        ok "$name"
    fi
}

# Whether any pid listed in $1 is alive (zombies waiting for their reaper count as gone).
any_alive() {
    local p state line
    [[ -s $1 ]] || return 1
    while read -r p; do
        [[ -n $p && -r /proc/$p/stat ]] || { kill -0 "$p" 2>/dev/null && return 0; continue; }
        { read -r line </proc/"$p"/stat; } 2>/dev/null || continue
        read -r state _ <<<"${line##*) }"
        [[ $state != Z ]] && return 0
    done <"$1"
    return 1
}

adapter_session() { # the session id a plain run (no --session-id/--resume) must report
    case $1 in
        claude) echo uuid ;;
        cursor) echo "$CHAT_ID" ;;
        codex) echo "$THREAD_ID" ;;
    esac
}

corpus_file() { # what the stub plays in mode ok (see fixtures/stub-engines/README.md)
    case $1 in
        claude) echo "$ROOT/fixtures/claude/bb-turn-tools.partial.jsonl" ;;
        cursor) echo "$ROOT/fixtures/cursor/synthetic.partial-output.jsonl" ;;
        codex) echo "$ROOT/fixtures/codex/openai-docs-exec-sample.jsonl" ;;
    esac
}

probe() {
    local w=$1 want
    want=$(adapter_session "$w")

    # success
    STUB_MODE=ok run "$w" --prompt "-starts with a dash; \"quotes\" and
a newline"
    expect_status "$w: success: exit 0, ok, session_id $want" 0 "$want"
    # the stream, byte for byte: the corpus with the session id the stub wrote into it
    local key=session_id
    [[ $w == codex ]] && key=thread_id
    parse_status || true
    grep -v '"runwire.status"' "$(corpus_file "$w")" |
        sed -e "s|\"$key\":\"[^\"]*\"|\"$key\":\"${S_SID:-}\"|g" >"$WORK/want"
    head -n -1 "$OUT" >"$WORK/got"
    if cmp -s "$WORK/want" "$WORK/got"; then
        ok "$w: success: the engine's $(wc -l <"$WORK/got") lines pass through unchanged before the status line"
    else
        not_ok "$w: success: the stream was altered" "$(diff "$WORK/want" "$WORK/got" | head -n 5 | cut -c1-200)"
    fi

    # the session id the contract promises
    case $w in
        claude)
            STUB_MODE=ok run claude --prompt hi --session-id "$SID"
            expect_status "claude: --session-id is assigned and reported" 0 "$SID"
            ;;
        *)
            STUB_MODE=ok run "$w" --prompt hi --session-id "$SID"
            expect_status "$w: --session-id is ignored (engine assigns), real id reported" 0 "$want"
            if grep -q -- '--session-id is ignored' "$ERR"; then ok "$w: --session-id ignored with a warning"; else not_ok "$w: no warning for ignored --session-id"; fi
            ;;
    esac
    STUB_ARGV_LOG=$WORK/argv STUB_MODE=ok run "$w" --prompt hi --resume "$RESUME_ID"
    expect_status "$w: --resume ID reports session_id ID" 0 "$RESUME_ID"
    if [[ $w == cursor ]]; then
        if grep -q create-chat "$WORK/argv"; then not_ok "cursor: --resume must not call create-chat"; else ok "cursor: --resume skips create-chat"; fi
        STUB_ARGV_LOG=$WORK/argv2 STUB_MODE=ok run cursor --prompt hi
        if [[ $(head -n 1 "$WORK/argv2") == "cursor-agent create-chat " ]]; then ok "cursor: a new turn calls create-chat first"; else not_ok "cursor: create-chat not called first" "$(cat "$WORK/argv2")"; fi
        STUB_CREATE_CHAT=fail run cursor --prompt hi
        expect_status "cursor: create-chat failing is an engine failure" 1 null
    fi
    rm -f "$WORK/argv" "$WORK/argv2"

    # engine failure
    STUB_MODE=fail run "$w" --prompt hi
    expect_status "$w: engine exits 1: exit 1" 1 any
    STUB_MODE=turn-failed run "$w" --prompt hi
    expect_status "$w: engine exits 0 but its stream reports a failed turn: exit 1" 1 any
    STUB_MODE=bad-json run "$w" --prompt hi
    expect_status "$w: engine prints only a non-JSON line and exits 0: exit 1" 1 any
    if head -n 1 "$OUT" | grep -q 'not JSON'; then ok "$w: a non-JSON line passes through"; else not_ok "$w: non-JSON line lost"; fi
    STUB_MODE=noise run "$w" --prompt hi
    expect_status "$w: a non-JSON line before a good stream: exit 0" 0 "$want"
    STUB_MODE=no-eol run "$w" --prompt hi
    expect_status "$w: a stream whose last line has no newline: the status line is still a line of its own" 0 "$want"
    STUB_MODE=resume-miss run "$w" --prompt hi --resume "$RESUME_ID"
    expect_status "$w: --resume of an unknown session: exit 1, session_id null" 1 null

    # engine not found
    local var
    case $w in
        claude) var=RUNWIRE_CLAUDE_BIN ;;
        cursor) var=RUNWIRE_CURSOR_BIN ;;
        codex) var=RUNWIRE_CODEX_BIN ;;
    esac
    env "$var=$WORK/no-such-engine" "$WRAPPERS/$w.sh" --prompt hi >"$WORK/out" 2>"$WORK/err" && RC=0 || RC=$?
    OUT=$WORK/out ERR=$WORK/err LAST=$(tail -n 1 "$WORK/out")
    expect_status "$w: $var names a missing file: exit 127" 127 null
    env PATH=/usr/bin:/bin "$(command -v bash)" "$WRAPPERS/$w.sh" --prompt hi >"$WORK/out" 2>"$WORK/err" && RC=0 || RC=$?
    LAST=$(tail -n 1 "$WORK/out")
    expect_status "$w: engine not on PATH: exit 127" 127 null
    env "$var=$STUBS/$(basename "$(case $w in cursor) echo cursor-agent ;; *) echo "$w" ;; esac)")" PATH=/usr/bin:/bin "$(command -v bash)" "$WRAPPERS/$w.sh" --prompt hi >"$WORK/out" 2>"$WORK/err" && RC=0 || RC=$?
    LAST=$(tail -n 1 "$WORK/out")
    expect_status "$w: $var overrides PATH" 0 "$want"

    # timeout: SIGTERM to the engine's group; SIGKILL after the grace for one that ignores it
    local pids=$WORK/pids t0 t1
    for mode in hang ignore-term; do
        rm -f "$pids"
        t0=$(date +%s)
        STUB_MODE=$mode STUB_PID_FILE=$pids RUNWIRE_KILL_GRACE=1 run "$w" --prompt hi --timeout 1
        t1=$(date +%s)
        expect_status "$w: --timeout 1, engine $mode: exit 124" 124 any
        if any_alive "$pids"; then
            not_ok "$w: --timeout, $mode: engine process group still alive after the wrapper exited" "$(tr '\n' ' ' <"$pids")"
        elif [[ ! -s $pids ]]; then
            not_ok "$w: --timeout, $mode: the stub recorded no pids"
        else
            ok "$w: --timeout, $mode: engine and its child are gone ($(($(wc -l <"$pids"))) pids, $((t1 - t0)) s)"
        fi
    done

    # stopping the wrapper stops the engine
    rm -f "$pids"
    STUB_MODE=hang STUB_PID_FILE=$pids "$WRAPPERS/$w.sh" --prompt hi >"$WORK/out" 2>"$WORK/err" &
    local wp=$! i
    for ((i = 0; i < 100; i++)); do
        [[ -s $pids ]] && [[ $w != cursor || $(wc -l <"$pids") -ge 2 ]] && break
        sleep 0.05
    done
    sleep 0.2
    kill -TERM "$wp"
    RC=0
    wait "$wp" || RC=$?
    LAST=$(tail -n 1 "$WORK/out")
    expect_status "$w: SIGTERM to the wrapper: status line, exit 143" 143 any
    if any_alive "$pids"; then not_ok "$w: SIGTERM to the wrapper left the engine running"; else ok "$w: SIGTERM to the wrapper stops the engine's group"; fi

    # usage errors: exit 2, message on stderr, no status line
    local args
    for args in "" "--prompt" "--prompt x --bogus" "--prompt x --resume a --session-id $SID" \
        "--prompt x --timeout 0" "--prompt x --timeout 1s" "--prompt x --cwd $WORK/nope" "stray"; do
        # shellcheck disable=SC2086 # split on purpose
        run "$w" $args
        if ((RC == 2)) && [[ ! -s $OUT ]] && grep -q "^$w.sh: " "$ERR"; then
            ok "$w: usage error [$args]: exit 2, '$(head -n 1 "$ERR")'"
        else
            not_ok "$w: usage error [$args]" "exit $RC, stdout $(wc -c <"$OUT") bytes, stderr: $(head -n 1 "$ERR")"
        fi
    done
    run "$w" --help
    if ((RC == 0)) && grep -q -- '--prompt TEXT' "$OUT"; then ok "$w: --help"; else not_ok "$w: --help" "exit $RC"; fi

    # files: what git status reports under --cwd
    local repo=$WORK/repo-$w
    mkdir -p "$repo/sub"
    git -C "$repo" init -q
    echo a >"$repo/sub/a"
    git -C "$repo" add -A
    git -C "$repo" -c user.email=probe@runwire -c user.name=probe commit -q -m init
    echo b >>"$repo/sub/a"
    echo n >"$repo/sub/new file.txt"
    echo t >"$repo/top"
    STUB_MODE=ok run "$w" --prompt hi --cwd "$repo/sub"
    if parse_status && [[ $S_FILES == '"a","new file.txt"' ]]; then
        ok "$w: files lists git's changes under --cwd, relative to it"
    else
        not_ok "$w: files" "got [${S_FILES:-?}], want [\"a\",\"new file.txt\"]"
    fi
    STUB_MODE=ok run "$w" --prompt hi --cwd "$WORK"
    if parse_status && [[ -z $S_FILES ]]; then ok "$w: files is [] outside a git work tree"; else not_ok "$w: files outside git: [${S_FILES:-?}]"; fi
}

probe_claude_only() {
    # --interactive: runwire-session runs the engine (here the replay stub of a recorded
    # session, which checks every line written to it) with the wrapper's stdin as the
    # session input. Stdin is empty: nobody can answer, so the recorded Bash request is
    # refused at once (fail closed), as the recording's client denied it.
    if [[ -z ${RUNWIRE_SESSION_BIN:-} ]] || ! command -v jq >/dev/null 2>&1; then
        printf '# skip - claude: --interactive (needs RUNWIRE_SESSION_BIN, a built runwire-session, and jq)\n'
    else
        local cell=$ROOT/fixtures/interactive/claude-code/approval-deny eng=$WORK/replay-claude prompt
        printf '#!/usr/bin/env bash\nexec %q claude %q "$@"\n' "$STUBS/replay" "$cell" >"$eng"
        chmod +x "$eng"
        prompt=$(jq -r '.line | fromjson | select(.type == "user") | .message.content' "$cell/to-agent.ndjson")
        RUNWIRE_CLAUDE_BIN=$eng run claude --interactive --prompt "$prompt" </dev/null
        expect_status "claude: --interactive runs the session to the turn's end" 0 451f0987-160f-433f-8d12-d0561e197bda
        # Each line carries runwire's interrupt id for the request after the agent's id.
        if grep -q '^{"type":"runwire.request","id":"a0f4e6d2-c337-4d5d-a775-db811343a5a9","interrupt_id":"rw-[0-9a-f]\{32\}","kind":"tool_approval"' "$OUT" &&
            grep -q '^{"type":"runwire.answer","id":"a0f4e6d2-c337-4d5d-a775-db811343a5a9","interrupt_id":"rw-[0-9a-f]\{32\}","decision":"cancelled"' "$OUT" &&
            ! grep -q 'replay stub:' "$ERR"; then
            ok "claude: --interactive: the request and its fail-closed answer are in the stream; the engine got what the recording shows"
        else
            not_ok "claude: --interactive: request and answer lines" "stderr: $(head -c 600 "$ERR" | tr '\n' '|')"
        fi
        RUNWIRE_SESSION_BIN=$WORK/nope run claude --interactive --prompt hi </dev/null
        expect_status "claude: --interactive without runwire-session: exit 127" 127 null
    fi
    run claude --prompt hi --session-id not-a-uuid
    if ((RC == 2)) && [[ ! -s $OUT ]]; then ok "claude: --session-id that is not a UUID: usage error"; else not_ok "claude: non-UUID --session-id" "exit $RC"; fi
    # the contract's grace is 5 s: one check with the default
    local pids=$WORK/pids t0 t1
    rm -f "$pids"
    t0=$(date +%s)
    STUB_MODE=ignore-term STUB_PID_FILE=$pids run claude --prompt hi --timeout 1
    t1=$(date +%s)
    expect_status "claude: --timeout 1, engine ignores SIGTERM, default grace: exit 124" 124 any
    if any_alive "$pids"; then
        not_ok "claude: default grace: engine group alive"
    elif ((t1 - t0 >= 5 && t1 - t0 <= 9)); then
        ok "claude: default grace: SIGKILL about 5 s after SIGTERM ($((t1 - t0)) s in all)"
    else
        not_ok "claude: default grace took $((t1 - t0)) s, want about 6"
    fi
}

want=("$@")
((${#want[@]})) || want=(claude cursor codex)
for w in "${want[@]}"; do
    case $w in
        claude | cursor | codex) ;;
        *)
            echo "_contract-probe.sh: unknown wrapper '$w' (claude, cursor, codex)" >&2
            exit 2
            ;;
    esac
    probe "$w"
    [[ $w == claude ]] && probe_claude_only
    # Every wrapper's --interactive needs runwire-session (the sessions themselves are
    # replayed against recorded cells by tests/it/session_replay.rs and tests/it/wrappers.rs).
    if [[ $w != claude ]]; then
        RUNWIRE_SESSION_BIN=$WORK/nope run "$w" --interactive --prompt hi </dev/null
        expect_status "$w: --interactive without runwire-session: exit 127" 127 null
    fi
done

printf '# %d passed, %d failed\n' "$PASS" "$FAIL"
((FAIL == 0))
