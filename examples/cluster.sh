#!/usr/bin/env bash
# examples/cluster.sh: one studio for two machines, on this one. Starts a
# local 3-server NATS JetStream cluster (nats-server: apt-get install
# nats-server), makes its streams and buckets (3 replicas), two runwire nodes
# ("alpha" and "beta", each with its own HARNESS_HOME, each recording a
# demo run) and a hub, each with its own NATS user and the permissions of
# examples/cluster/accounts.conf (spec/CLUSTER.md, Security), then prints
# the hub's studio address and waits;
# Ctrl-C stops everything and removes the scratch directory.
#
#   bash examples/cluster.sh            # and open the printed address
#   CLUSTER_EXAMPLE_CHECK=1 bash examples/cluster.sh   # exits 0 once the hub lists both nodes' runs
#
# Ports: free ones, picked as it starts. Each runwire-serve listens on port
# 0 (the kernel's pick) and is reached at the address its own first stdout
# line names; each nats-server must say in its log that it listens on the
# port it was given, and runs on: a foreign server on a port is never the
# one talked to.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v nats-server >/dev/null || { echo "cluster.sh: nats-server is not on PATH (apt-get install nats-server)" >&2; exit 3; }
cargo build --quiet --workspace --bins
bin=$PWD/target/debug
work=$(mktemp -d /tmp/runwire-cluster-example.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The accounts of examples/cluster/accounts.conf: an admin, the hub and a
# user per node (who publishes only as that node and sends no control).
# Fresh passwords, in files only their users read; nats-server gets them
# from its own environment.
cp examples/cluster/accounts.conf "$work/"
printf 'include ./accounts.conf\n' >"$work/accounts-include.conf"
pwenv=()
for user in admin hub node-alpha node-beta; do
  (umask 077; head -c 18 /dev/urandom | base64 | tr -d '/+=\n' >"$work/$user.pw")
  var=RUNWIRE_$(echo "$user" | tr 'a-z-' 'A-Z_')_PASSWORD
  pwenv+=("$var=$(cat "$work/$user.pw")")
done
as() { echo --cluster-user "$1" --cluster-password-file "$work/$1.pw"; }

# Six free ports (clients, routes): bound to port 0 and let go, so taken
# only if another program grabs one in between (then a server below says
# so and the script stops).
read -r -a ports <<<"$(python3 -c '
import socket
ss = [socket.socket() for _ in range(6)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))')"
urls=()
for i in 0 1 2; do
  routes=()
  for j in 0 1 2; do [ "$j" = "$i" ] || routes+=("nats://127.0.0.1:${ports[$((3 + j))]}"); done
  env "${pwenv[@]}" nats-server -c "$work/accounts-include.conf" \
    -a 127.0.0.1 -p "${ports[$i]}" -n "s$i" -js -sd "$work/js-$i" \
    --cluster_name runwire-example --cluster "nats://127.0.0.1:${ports[$((3 + i))]}" \
    --routes "$(IFS=,; echo "${routes[*]}")" 2>"$work/nats-$i.log" &
  pids+=($!)
  urls+=("nats://127.0.0.1:${ports[$i]}")
done
# Each server is ours: it says it listens on its port, and it is still running.
for i in 0 1 2; do
  for _ in $(seq 100); do
    grep -q "Listening for client connections on 127.0.0.1:${ports[$i]}" "$work/nats-$i.log" 2>/dev/null && break
    sleep 0.1
  done
  if ! grep -q "Listening for client connections on 127.0.0.1:${ports[$i]}" "$work/nats-$i.log" \
    || ! kill -0 "${pids[$i]}" 2>/dev/null; then
    echo "cluster.sh: nats-server s$i did not start on port ${ports[$i]}: $(tail -n 3 "$work/nats-$i.log")" >&2
    exit 3
  fi
done
url=$(IFS=,; echo "${urls[*]}")

# The admin's part, once: streams and buckets with 3 replicas (retried
# until the servers have elected a JetStream leader).
for _ in $(seq 60); do
  "$bin/runwire-cluster" setup --url "$url" --replicas 3 --user admin --password-file "$work/admin.pw" \
    >/dev/null 2>"$work/setup.err" && break
  sleep 0.5
done
"$bin/runwire-cluster" setup --url "$url" --replicas 3 --user admin --password-file "$work/admin.pw"

declare -A port
serve() { # name args...: its port is the one it picked (its first stdout line)
  local name=$1 line=''
  shift
  mkdir -p "$work/$name"
  HARNESS_HOME=$work/$name "$bin/runwire-serve" --listen 127.0.0.1:0 --cluster "$url" "$@" \
    >"$work/$name.out" 2>"$work/$name.err" &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 100); do
    line=$(head -n 1 "$work/$name.out" 2>/dev/null || true)
    [ -n "$line" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  port[$name]=${line##*:}
  if ! [[ ${port[$name]} =~ ^[0-9]+$ ]] || ! kill -0 "$pid" 2>/dev/null \
    || ! curl -fs "http://127.0.0.1:${port[$name]}/runs" >/dev/null; then
    echo "cluster.sh: $name did not start: $(cat "$work/$name.err")" >&2
    exit 3
  fi
}
# shellcheck disable=SC2046 # as USER: two flags and their values, no spaces
serve alpha --node alpha $(as node-alpha)
# shellcheck disable=SC2046
serve beta --node beta $(as node-beta)
# shellcheck disable=SC2046
serve hub --hub $(as hub)
hub=http://127.0.0.1:${port[hub]}

# A run on each node: the bundled recorded Claude run, replayed.
for p in "${port[alpha]}" "${port[beta]}"; do
  curl -fsN -X POST "http://127.0.0.1:$p/agui" -H 'Content-Type: application/json' \
    -d '{"threadId":"t1","runId":"demo-1","messages":[{"id":"u1","role":"user","content":"hi"}]}' >/dev/null
done

for _ in $(seq 300); do
  n=$(curl -fs "$hub/runs" | jq '[.runs[] | select(.node == "alpha" or .node == "beta")] | length' 2>/dev/null || echo 0)
  [ "$n" -ge 2 ] && break
  sleep 0.1
done
echo "the hub lists $n runs:"
curl -fs "$hub/runs" | jq -r '.runs[] | "  \(.runId)  \(.status)  node \(.node) \(.nodeState)"'
[ -n "${CLUSTER_EXAMPLE_CHECK:-}" ] && { [ "$n" -ge 2 ]; exit; }
echo
echo "studio at the hub: $hub/   (alpha: http://127.0.0.1:${port[alpha]}/, beta: http://127.0.0.1:${port[beta]}/)"
echo "node heartbeats:   $bin/runwire-cluster nodes --url $url --user hub --password-file $work/hub.pw"
echo "Ctrl-C stops the cluster, the nodes and the hub."
wait
