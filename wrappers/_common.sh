# shellcheck shell=bash
# Shared body of wrappers/{claude,cursor,codex}.sh. Sourced, never run.
# The contract it implements is spec/WRAPPER-CONTRACT.md; keep the two in step.
#
# A wrapper sets these before calling rw_main "$@":
#   RW_NAME        its name for messages: claude.sh, cursor.sh, codex.sh
#   RW_ENGINE      the engine's command name on PATH: claude, cursor-agent, codex
#   RW_BIN_VAR     the environment variable that overrides it: RUNWIRE_CLAUDE_BIN, ...
#   RW_INTERACTIVE 1 when --interactive is declared: RW_LIVE is then 1
#                  when it was given, and rw_prepare runs the engine under
#                  runwire-session with the wrapper's stdin as the session input
# and defines:
#   rw_session_flag_ok   0 when --session-id can be honoured, 1 when it is ignored
#   rw_prepare           set RW_SESSION_ASSIGNED / build RW_ARGV (may run engine steps)
#   rw_judge             read "$RW_TMP/marks", set RW_TURN_OK (0/1), RW_TURN_DETAIL,
#                        RW_SESSION (the id the engine reported, or empty)

RW_PROMPT=""
RW_PROMPT_SET=0
RW_SESSION_ID=""
RW_RESUME=""
RW_CWD=""
RW_TIMEOUT=""
RW_TMP=""
RW_DEADLINE=""
RW_ENGINE_PGID=""
RW_STOP_SIGNAL=""
RW_SESSION=""
RW_TURN_OK=0
RW_TURN_DETAIL=""
RW_TIMED_OUT=0
RW_FINISHED=0
RW_STARTED=0
RW_ARGV=()
RW_LIVE=0
# The runwire-session binary an --interactive run uses (rw_session_engine).
RW_SESSION_ENGINE=""

# Grace between SIGTERM and SIGKILL to the engine's process group, in seconds.
RW_KILL_GRACE="${RUNWIRE_KILL_GRACE:-5}"

rw_usage() {
    cat <<EOF
Usage: $RW_NAME --prompt TEXT [--session-id ID | --resume ID] [--cwd DIR] [--timeout SECONDS]

Run one turn of $RW_ENGINE with TEXT as the prompt, stream its raw JSON lines on
stdout, then print one status line:
  {"type":"runwire.status","ok":..,"rc":..,"session_id":..,"detail":..,"files":[..]}

Options:
  --prompt TEXT        the prompt (required)
  --session-id ID      assign the session id (claude: a UUID; cursor and codex
                       cannot take one: the flag is ignored with a warning)
  --resume ID          continue an existing session
  --cwd DIR            run the engine in DIR (default: the current directory)
  --timeout SECONDS    stop the engine after SECONDS (SIGTERM to its process
                       group, SIGKILL ${RW_KILL_GRACE}s later); default: no limit
EOF
    if [[ "${RW_INTERACTIVE:-0}" == 1 ]]; then
        cat <<EOF
  --interactive        keep the engine's input open: runwire-session runs it and
                       reads the session input (spec/SESSION-INPUT.md: answers,
                       messages, interrupt, end) on this wrapper's stdin; the
                       stream carries runwire.request / runwire.answer lines.
                       \$RUNWIRE_SESSION_BIN, else 'runwire-session' on PATH;
                       \$RUNWIRE_ANSWER_TIMEOUT (default: 300s)
EOF
        case $RW_ENGINE in
            claude) echo "                       \$RUNWIRE_PERMISSION_MODE, \$RUNWIRE_PLAN_EXIT_MODE (default: default), \$RUNWIRE_GRANT_ALL=1" ;;
            codex) echo "                       \$RUNWIRE_SANDBOX (default: workspace-write), \$RUNWIRE_APPROVAL_POLICY" \
                "(default: on-request), \$RUNWIRE_GRANT_ALL=1 (for danger-full-access)" ;;
            *) echo "                       \$RUNWIRE_ACP_MODE (a session mode of the agent's: agent, plan, ask)" ;;
        esac
    fi
    cat <<EOF
  --help               this text

Engine: \$$RW_BIN_VAR, else '$RW_ENGINE' on PATH.
EOF
    if [[ $RW_ENGINE == codex ]]; then
        cat <<EOF
codex exec runs only in a git work tree or a directory trusted in codex's config;
\$RUNWIRE_CODEX_SKIP_GIT_REPO_CHECK=1 passes --skip-git-repo-check (anywhere).
EOF
    fi
    cat <<EOF
Exit: 0 success; 1 engine failure; 2 usage error; 124 timeout; 127 engine not found;
128+N when the wrapper itself is stopped by signal N.
See spec/WRAPPER-CONTRACT.md.
EOF
}

# A usage error: message on stderr, no status line, exit 2.
rw_usage_error() {
    printf '%s: %s\n' "$RW_NAME" "$1" >&2
    printf "%s: try '%s --help'\n" "$RW_NAME" "$RW_NAME" >&2
    exit 2
}

rw_warn() {
    printf '%s: %s\n' "$RW_NAME" "$1" >&2
}

# JSON string literal of $1 (quotes included), in pure bash.
rw_json_str() {
    local s=$1 c i
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//$'\n'/\\n}
    s=${s//$'\r'/\\r}
    s=${s//$'\t'/\\t}
    s=${s//$'\b'/\\b}
    s=${s//$'\f'/\\f}
    if [[ $s == *[$'\x01'-$'\x1f']* ]]; then
        for i in {1..31}; do
            printf -v c '%b' "\\0$(printf '%03o' "$i")"
            [[ $s == *"$c"* ]] || continue
            s=${s//"$c"/$(printf '\\u%04x' "$i")}
        done
    fi
    printf '"%s"' "$s"
}

rw_parse_args() {
    local flag val
    while (($#)); do
        flag=$1
        val=""
        case $flag in
            --help | -h)
                rw_usage
                exit 0
                ;;
            --interactive)
                [[ "${RW_INTERACTIVE:-0}" == 1 ]] || rw_usage_error "unknown flag: $flag"
                RW_LIVE=1
                shift
                continue
                ;;
            --prompt=* | --session-id=* | --resume=* | --cwd=* | --timeout=*)
                val=${flag#*=}
                flag=${flag%%=*}
                ;;
            --prompt | --session-id | --resume | --cwd | --timeout)
                (($# >= 2)) || rw_usage_error "$flag needs a value"
                val=$2
                shift
                ;;
            --)
                rw_usage_error "unexpected argument: --"
                ;;
            -*)
                rw_usage_error "unknown flag: $flag"
                ;;
            *)
                rw_usage_error "unexpected argument: $flag (the prompt goes in --prompt)"
                ;;
        esac
        shift
        case $flag in
            --prompt)
                RW_PROMPT=$val
                RW_PROMPT_SET=1
                ;;
            --session-id)
                [[ -n $val ]] || rw_usage_error "--session-id needs a non-empty value"
                RW_SESSION_ID=$val
                ;;
            --resume)
                [[ -n $val ]] || rw_usage_error "--resume needs a non-empty value"
                RW_RESUME=$val
                ;;
            --cwd)
                [[ -n $val ]] || rw_usage_error "--cwd needs a non-empty value"
                RW_CWD=$val
                ;;
            --timeout)
                if [[ ! $val =~ ^[0-9]{1,9}$ ]] || ((10#$val == 0)); then
                    rw_usage_error "--timeout needs a whole number of seconds > 0, got '$val'"
                fi
                RW_TIMEOUT=$((10#$val))
                ;;
        esac
    done
    ((RW_PROMPT_SET)) || rw_usage_error "--prompt is required"
    [[ -n $RW_PROMPT ]] || rw_usage_error "--prompt must not be empty"
    if [[ -n $RW_SESSION_ID && -n $RW_RESUME ]]; then
        rw_usage_error "--session-id and --resume exclude each other"
    fi
    if [[ -n $RW_CWD && ! -d $RW_CWD ]]; then
        rw_usage_error "--cwd: not a directory: $RW_CWD"
    fi
}

rw_is_uuid() {
    [[ $1 =~ ^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$ ]]
}

rw_new_uuid() {
    local u
    if [[ -r /proc/sys/kernel/random/uuid ]]; then
        read -r u </proc/sys/kernel/random/uuid
    else
        # Version 4, variant 10xx, from $SRANDOM (bash 5.1+) or $RANDOM.
        local h="" i
        for i in {1..8}; do printf -v h '%s%04x' "$h" $(((${SRANDOM:-$RANDOM} ^ RANDOM) & 0xffff)); done
        u="${h:0:8}-${h:8:4}-4${h:13:3}-$(printf '%x' $(((0x${h:16:1} & 3) | 8)))${h:17:3}-${h:20:12}"
    fi
    printf '%s\n' "$u"
}

# The paths git reports as changed under the engine's directory, relative to it,
# one JSON string each, comma-separated. Empty when it is not a git work tree.
rw_files_json() {
    local dir=${RW_CWD:-.} prefix entry path out="" status
    git -C "$dir" rev-parse --is-inside-work-tree >/dev/null 2>&1 || return 0
    prefix=$(git -C "$dir" rev-parse --show-prefix 2>/dev/null) || return 0
    local skip_next=0
    while IFS= read -r -d '' entry; do
        if ((skip_next)); then
            # the source path of a rename or copy
            skip_next=0
            continue
        fi
        status=${entry:0:2}
        path=${entry:3}
        [[ $status == R* || $status == C* ]] && skip_next=1
        path=${path#"$prefix"}
        out+="${out:+,}$(rw_json_str "$path")"
    done < <(git -C "$dir" status --porcelain=v1 -z --untracked-files=all -- . 2>/dev/null || true)
    printf '%s' "$out"
}

# Print the status line and exit with RC.
rw_finish() {
    local rc=$1 detail=$2 ok=false sid=null
    RW_FINISHED=1
    ((rc == 0)) && ok=true
    [[ -n $RW_SESSION ]] && sid=$(rw_json_str "$RW_SESSION")
    detail=${detail//$'\n'/ }
    ((${#detail} > 300)) && detail="${detail:0:297}..."
    printf '{"type":"runwire.status","ok":%s,"rc":%d,"session_id":%s,"detail":%s,"files":[%s]}\n' \
        "$ok" "$rc" "$sid" "$(rw_json_str "$detail")" "$(rw_files_json)"
    exit "$rc"
}

rw_find_engine() {
    local override=${!RW_BIN_VAR:-}
    if [[ -n $override ]]; then
        if [[ $override == */* ]]; then
            [[ -f $override && -x $override ]] || return 1
            RW_BIN=$override
            return 0
        fi
        RW_BIN=$(command -v -- "$override") || return 1
        return 0
    fi
    RW_BIN=$(command -v -- "$RW_ENGINE") || return 1
}

# Whether the engine's process group still has a live member. kill -0 also
# succeeds on zombies, which the reaper of orphans (pid 1 or a subreaper) may
# collect late, so on Linux the members' states are read from /proc.
rw_group_alive() {
    [[ -n $RW_ENGINE_PGID ]] || return 1
    kill -0 -- "-$RW_ENGINE_PGID" 2>/dev/null || return 1
    [[ -r /proc/self/stat ]] || return 0
    local f line state pgrp
    for f in /proc/[0-9]*/stat; do
        { read -r line <"$f"; } 2>/dev/null || continue
        # pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses
        read -r state _ pgrp _ <<<"${line##*) }"
        [[ $pgrp == "$RW_ENGINE_PGID" && $state != Z ]] && return 0
    done
    return 1
}

# SIGTERM to the engine's process group, SIGKILL after the grace if any is left.
rw_stop_group() {
    rw_group_alive || return 0
    kill -TERM -- "-$RW_ENGINE_PGID" 2>/dev/null || true
    local until=$(($(rw_now_us) + RW_KILL_GRACE * 1000000))
    while (($(rw_now_us) < until)); do
        rw_group_alive || return 0
        sleep 0.1
    done
    kill -KILL -- "-$RW_ENGINE_PGID" 2>/dev/null || true
}

rw_on_signal() {
    RW_STOP_SIGNAL=$1
    if [[ -n $RW_ENGINE_PGID ]]; then
        kill -TERM -- "-$RW_ENGINE_PGID" 2>/dev/null || true
    fi
}

rw_cleanup() {
    local rc=$?
    if ((!RW_FINISHED)); then
        # A bug in the wrapper must not cost the caller its status line.
        trap - EXIT
        rw_stop_group
        rw_warn "internal error (status $rc) before the status line"
        RW_FINISHED=1
        printf '{"type":"runwire.status","ok":false,"rc":1,"session_id":null,"detail":"wrapper internal error","files":[]}\n' || true
        rc=1
    fi
    [[ -z ${RW_WATCHDOG:-} ]] || kill "$RW_WATCHDOG" 2>/dev/null || true
    [[ -n $RW_TMP && -d $RW_TMP ]] && rm -rf -- "$RW_TMP"
    exit "$rc"
}

rw_now_us() {
    local t=${EPOCHREALTIME/[^0-9]/}
    printf '%s' "$((10#$t))"
}

# Seconds left before the deadline, as a decimal (empty when there is none; 0 when past).
rw_remaining() {
    [[ -n $RW_DEADLINE ]] || return 0
    local left=$((RW_DEADLINE - $(rw_now_us)))
    ((left < 0)) && left=0
    printf '%d.%06d' $((left / 1000000)) $((left % 1000000))
}

# Whether an engine step may start: not stopped by a signal, deadline not passed.
# Sets RW_RC and RW_TIMED_OUT when it may not.
rw_may_start() {
    if [[ -n $RW_STOP_SIGNAL ]]; then
        RW_RC=1
        return 1
    fi
    local left
    left=$(rw_remaining)
    if [[ -n $left && $left == 0.000000 ]]; then
        RW_TIMED_OUT=1
        RW_RC=124
        return 1
    fi
    return 0
}

# rw_run OUT ARG...: run "$RW_BIN" ARG... in a new process group (session), stdin
# /dev/null, stdout to OUT, stderr to ours, under the deadline. Sets RW_RC to its exit
# status (or 124 when the deadline stopped it). Never returns non-zero itself.
rw_run() {
    local out=$1 left
    shift
    RW_RC=0
    RW_STARTED=0
    rw_may_start || return 0
    RW_STARTED=1
    left=$(rw_remaining)
    # A background child of a non-interactive shell is not a group leader, so
    # setsid(1) calls setsid(2) without forking: $! is the engine, its pid its pgid.
    # An interactive session reads its input from our stdin (named, or a
    # background job would get /dev/null).
    if ((RW_LIVE)); then
        setsid -- "$RW_BIN" "$@" <&0 >"$out" &
    else
        setsid -- "$RW_BIN" "$@" </dev/null >"$out" &
    fi
    RW_ENGINE_PGID=$!
    RW_WATCHDOG=""
    if [[ -n $left ]]; then
        (
            trap 'kill "$sp" 2>/dev/null; exit 0' TERM
            sleep "$left" &
            sp=$!
            wait "$sp"
            : >"$RW_TMP/timed-out"
            rw_stop_group
        ) &
        RW_WATCHDOG=$!
    fi
    while :; do
        RW_RC=0
        wait "$RW_ENGINE_PGID" || RW_RC=$?
        # wait returns early (>128) when a trapped signal arrives; go on waiting.
        if ((RW_RC > 128)) && kill -0 "$RW_ENGINE_PGID" 2>/dev/null; then
            # Stopped from outside: the engine goes too, SIGKILL after the grace.
            [[ -n $RW_STOP_SIGNAL ]] && rw_stop_group
            continue
        fi
        break
    done
    if [[ -n $RW_WATCHDOG ]]; then
        kill "$RW_WATCHDOG" 2>/dev/null || true
        wait "$RW_WATCHDOG" 2>/dev/null || true
        RW_WATCHDOG=""
    fi
    # Whatever the engine left in its group goes with it.
    rw_stop_group
    RW_ENGINE_PGID=""
    if [[ -e $RW_TMP/timed-out ]]; then
        RW_TIMED_OUT=1
        RW_RC=124
    fi
    return 0
}

# Run the turn: engine stdout through tee to our stdout, with the lines that matter
# (RW_MARKS, an ERE) kept in "$RW_TMP/marks" for rw_judge.
rw_run_streaming() {
    local fifo=$RW_TMP/engine.out mfifo=$RW_TMP/marks.in lfifo=$RW_TMP/last.in tpid gpid lpid
    # Decide before the readers open the fifos: they block until the engine does.
    rw_may_start || return 0
    mkfifo "$fifo" "$mfifo" "$lfifo"
    LC_ALL=C grep -a -E -e "$RW_MARKS" <"$mfifo" >"$RW_TMP/marks" &
    gpid=$!
    # The stream's last byte: the status line must start on a line of its own.
    tail -c 1 <"$lfifo" >"$RW_TMP/last-byte" &
    lpid=$!
    tee -- "$mfifo" "$lfifo" <"$fifo" &
    tpid=$!
    rw_run "$fifo" "$@"
    if ((!RW_STARTED)); then
        # Nobody opened the fifo for writing: open and close it (O_RDWR does not
        # block) so that tee, then grep, see end of file.
        local fd
        exec {fd}<>"$fifo"
        exec {fd}>&-
    fi
    wait "$tpid" || true
    wait "$gpid" || true
    wait "$lpid" || true
    local last=""
    [[ -s $RW_TMP/last-byte ]] && last=$(od -An -c <"$RW_TMP/last-byte" | tr -d ' ')
    if [[ -n $last && $last != '\n' ]]; then
        printf '\n'
    fi
}

# Extract the first value of a string field "KEY":"..." from $1 (escapes are kept;
# nothing, and status 0, when it is absent).
rw_field() {
    local re="\"$2\"[[:space:]]*:[[:space:]]*\"(([^\"\\\\]|\\\\.)*)\""
    if [[ $1 =~ $re ]]; then printf '%s' "${BASH_REMATCH[1]}"; fi
}

# $1, a JSON string's inside as found in a line, made readable for `detail`: the
# common escapes undone (\uXXXX is left as it is), cut to 400 characters first.
rw_unescape() {
    local s=${1:0:400} out="" c
    while [[ -n $s ]]; do
        c=${s:0:1}
        if [[ $c == "\\" && ${#s} -ge 2 ]]; then
            case ${s:1:1} in
                n | r | t) out+=' ' ;;
                '"' | "\\" | /) out+=${s:1:1} ;;
                *) out+=${s:0:2} ;;
            esac
            s=${s:2}
        else
            out+=$c
            s=${s:1}
        fi
    done
    printf '%s' "$out"
}

# Extract the first value of a literal field "KEY":true|false|null|number from $1.
rw_lit() {
    local re="\"$2\"[[:space:]]*:[[:space:]]*(true|false|null|-?[0-9][0-9.eE+-]*)"
    if [[ $1 =~ $re ]]; then printf '%s' "${BASH_REMATCH[1]}"; fi
}

# Whether $1 holds the member "KEY":"VALUE" ($2, $3; VALUE is matched literally).
# Key order is not fixed and nested objects have "type" keys too, so a line is
# classified by the members it holds, not by its first "type".
rw_has() {
    local v=$3
    v=${v//./\\.}
    local re="\"$2\"[[:space:]]*:[[:space:]]*\"$v\""
    [[ $1 =~ $re ]]
}

# --interactive: runwire-session becomes the engine (it runs the agent named in
# RW_ARGV's first word, the agent's own binary after `--`): sets RW_SESSION_ENGINE
# to its path, or finishes with 127 (not in a subshell: rw_finish must end the wrapper).
rw_session_engine() {
    local session=${RUNWIRE_SESSION_BIN:-runwire-session}
    if [[ $session != */* ]]; then
        session=$(command -v -- "$session") || rw_finish 127 "runwire-session not found: set RUNWIRE_SESSION_BIN or put it on PATH"
    fi
    [[ -f $session && -x $session ]] || rw_finish 127 "runwire-session not found: $session is not an executable"
    # shellcheck disable=SC2034 # read by the wrapper that sourced this file
    RW_SESSION_ENGINE=$session
}

# Defaults a wrapper may override.
rw_validate() { :; }

rw_main() {
    rw_parse_args "$@"
    if [[ -n $RW_SESSION_ID ]] && ! rw_session_flag_ok; then
        rw_warn "--session-id is ignored: $RW_ENGINE cannot take a caller-chosen session id; read session_id from the status line"
        RW_SESSION_ID=""
    fi
    rw_validate
    [[ -n $RW_TIMEOUT ]] && RW_DEADLINE=$(($(rw_now_us) + RW_TIMEOUT * 1000000))
    if [[ -n $RW_CWD ]]; then
        cd -- "$RW_CWD" || rw_usage_error "--cwd: cannot enter $RW_CWD"
        RW_CWD=.
    fi

    if ! rw_find_engine; then
        local how="'$RW_ENGINE' is not on PATH"
        [[ -n ${!RW_BIN_VAR:-} ]] && how="$RW_BIN_VAR=${!RW_BIN_VAR} is not an executable"
        rw_warn "engine not found: $how"
        rw_finish 127 "engine not found: $how"
    fi

    # Under runwire-reaper, in the run's scratch directory: it goes with the
    # run even when this wrapper is SIGKILLed and rw_cleanup never runs.
    local tmp_base=${TMPDIR:-/tmp}
    [[ -n ${RUNWIRE_RUN_TMPDIR:-} && -d $RUNWIRE_RUN_TMPDIR ]] && tmp_base=$RUNWIRE_RUN_TMPDIR
    RW_TMP=$(mktemp -d "$tmp_base/runwire-wrap.XXXXXX")
    trap rw_cleanup EXIT
    trap 'rw_on_signal TERM' TERM
    trap 'rw_on_signal INT' INT
    trap 'rw_on_signal HUP' HUP

    if ! rw_prepare; then
        rw_finish_run
    fi
    rw_run_streaming "${RW_ARGV[@]}"
    rw_judge
    rw_finish_run
}

# The final judgement, from RW_RC (the engine's exit), RW_TIMED_OUT, RW_STOP_SIGNAL
# and what rw_judge read off the stream.
rw_finish_run() {
    local sig
    if [[ -n $RW_STOP_SIGNAL ]]; then
        sig=$(kill -l "$RW_STOP_SIGNAL" 2>/dev/null || echo 15)
        rw_finish $((128 + sig)) "stopped: the wrapper got SIG$RW_STOP_SIGNAL"
    fi
    if ((RW_TIMED_OUT)); then
        rw_finish 124 "timeout: engine stopped after ${RW_TIMEOUT}s"
    fi
    if ((RW_RC != 0)); then
        local d="engine exited $RW_RC"
        ((RW_RC > 128)) && d="engine killed by signal $((RW_RC - 128))"
        [[ -n $RW_TURN_DETAIL ]] && d+=": $RW_TURN_DETAIL"
        rw_finish 1 "$d"
    fi
    if ((!RW_TURN_OK)); then
        rw_finish 1 "${RW_TURN_DETAIL:-turn failed}"
    fi
    rw_finish 0 "${RW_TURN_DETAIL:-turn completed}"
}
