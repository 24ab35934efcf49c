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
# Ports: NATS clients 14222-14224, routes 16222-16224, HTTP: hub 8790,
# alpha 8791, beta 8792 (BASE_PORT shifts the NATS ones).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v nats-server >/dev/null || { echo "cluster.sh: nats-server is not on PATH (apt-get install nats-server)" >&2; exit 3; }
cargo build --quiet --workspace --bins
bin=$PWD/target/debug
base=${BASE_PORT:-14222}
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

urls=()
for i in 0 1 2; do
  routes=()
  for j in 0 1 2; do [ "$j" = "$i" ] || routes+=("nats://127.0.0.1:$((base + 2000 + j))"); done
  env "${pwenv[@]}" nats-server -c "$work/accounts-include.conf" \
    -a 127.0.0.1 -p $((base + i)) -n "s$i" -js -sd "$work/js-$i" \
    --cluster_name runwire-example --cluster "nats://127.0.0.1:$((base + 2000 + i))" \
    --routes "$(IFS=,; echo "${routes[*]}")" 2>"$work/nats-$i.log" &
  pids+=($!)
  urls+=("nats://127.0.0.1:$((base + i))")
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

serve() { # name port args...
  local name=$1 port=$2
  shift 2
  mkdir -p "$work/$name"
  HARNESS_HOME=$work/$name "$bin/runwire-serve" --listen "127.0.0.1:$port" --cluster "$url" "$@" \
    >"$work/$name.out" 2>"$work/$name.err" &
  pids+=($!)
  for _ in $(seq 100); do curl -fs "http://127.0.0.1:$port/runs" >/dev/null && return; sleep 0.1; done
  echo "cluster.sh: $name did not start: $(cat "$work/$name.err")" >&2
  exit 3
}
# shellcheck disable=SC2046 # as USER: two flags and their values, no spaces
serve alpha 8791 --node alpha $(as node-alpha)
# shellcheck disable=SC2046
serve beta 8792 --node beta $(as node-beta)
# shellcheck disable=SC2046
serve hub 8790 --hub $(as hub)

# A run on each node: the bundled recorded Claude run, replayed.
for port in 8791 8792; do
  curl -fsN -X POST "http://127.0.0.1:$port/agui" -H 'Content-Type: application/json' \
    -d '{"threadId":"t1","runId":"demo-1","messages":[{"id":"u1","role":"user","content":"hi"}]}' >/dev/null
done

for _ in $(seq 300); do
  n=$(curl -fs http://127.0.0.1:8790/runs | jq '.runs | length' 2>/dev/null || echo 0)
  [ "$n" -ge 2 ] && break
  sleep 0.1
done
echo "the hub lists $n runs:"
curl -fs http://127.0.0.1:8790/runs | jq -r '.runs[] | "  \(.runId)  \(.status)"'
[ -n "${CLUSTER_EXAMPLE_CHECK:-}" ] && { [ "$n" -ge 2 ]; exit; }
echo
echo "studio at the hub: http://127.0.0.1:8790/   (alpha: http://127.0.0.1:8791/, beta: http://127.0.0.1:8792/)"
echo "node heartbeats:   $bin/runwire-cluster nodes --url $url --user hub --password-file $work/hub.pw"
echo "Ctrl-C stops the cluster, the nodes and the hub."
wait
