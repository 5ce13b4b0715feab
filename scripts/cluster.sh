#!/usr/bin/env bash
# A local Felix cluster on one machine: etcd, a control plane and three
# brokers, with development identity (docs/operations.md, "A local
# cluster").
#
#   scripts/cluster.sh up      [DIR]  build, start, create tenant t1 and stream t1/default/demo, mint a client token
#   scripts/cluster.sh down    [DIR]  stop what up started (by the pids it recorded)
#   scripts/cluster.sh env     [DIR]  print the variables the walk-through uses
#   scripts/cluster.sh kill N  [DIR]  kill -9 broker N (1-3), as a lost host would die
#   scripts/cluster.sh start N [DIR]  start broker N again on its data directory
#   scripts/cluster.sh stop N  [DIR]  SIGTERM broker N and wait for it to exit (it hands its leaderships over first)
#   scripts/cluster.sh restart N [DIR]  stop and start broker N, then wait until no shard is under-replicated
#
# DIR defaults to $CLUSTER_DIR (which env sets), else out/cluster. Ports: CLUSTER_PORT_BASE (default
# 7060): etcd base+0/+1, control plane base+10 (API) and base+11
# (bootstrap), broker N QUIC base+20+N (UDP) and admin base+30+N.
# ETCD names an etcd binary to use instead of felix-devetcd. CLUSTER_PREBUILT
# names a directory holding felix-broker, felix-controlplane, felix-devetcd and
# felix to use instead of building them.
set -euo pipefail

cmd=${1:-}
case "$cmd" in
kill | start | stop | restart)
	node=${2:-}
	[[ $node =~ ^[123]$ ]] || { printf 'cluster: %s needs a broker number, 1 to 3\n' "$cmd" >&2; exit 2; }
	shift
	;;
esac
dir=${2:-${CLUSTER_DIR:-out/cluster}}
base=${CLUSTER_PORT_BASE:-7060}
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$dir/bin"
brokers=(1 2 3)

etcd_port=$base
cp_port=$((base + 10))
boot_port=$((base + 11))
quic_port() { echo $((base + 20 + $1)); }
admin_port() { echo $((base + 30 + $1)); }

say() { printf 'cluster: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# start NAME CMD... runs CMD in the background, logging to DIR/logs/NAME.log,
# and records its pid.
start() {
	local name=$1
	shift
	"$@" >"$dir/logs/$name.log" 2>&1 &
	echo "$! $name" >>"$dir/pids"
}

# wait_for WHAT CMD... retries CMD for up to 30 s.
wait_for() {
	local what=$1
	shift
	for _ in $(seq 300); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.1
	done
	die "$what did not come up; see $dir/logs"
}

# http_ok http://HOST:PORT/PATH: a 2xx answer (bash's /dev/tcp, no curl).
http_ok() {
	local hp=${1#http://}
	local host=${hp%%:*} rest=${hp#*:}
	local port=${rest%%/*} path=/${rest#*/} status
	exec 3<>"/dev/tcp/$host/$port" || return 1
	printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$path" "$host" >&3
	read -r _ status _ <&3 || status=
	exec 3>&-
	[[ $status == 2* ]]
}

# The walk-through's variables. None is named FELIX_*: the binaries take
# those as knobs.
cmd_env() {
	cat <<EOF
export CLUSTER_DIR=$dir
export CLUSTER_BIN=$bin
export CLUSTER_CONTROLPLANE=http://127.0.0.1:$cp_port
export CLUSTER_BOOTSTRAP=http://127.0.0.1:$boot_port
export CLUSTER_CA=$dir/tls/ca.pem
export CLUSTER_TOKEN=\$(cat $dir/client.token)
export CLUSTER_BROKERS="$(for n in "${brokers[@]}"; do printf '127.0.0.1:%s ' "$(quic_port "$n")"; done | sed 's/ $//')"
export CLUSTER_ADMINS="$(for n in "${brokers[@]}"; do printf '127.0.0.1:%s ' "$(admin_port "$n")"; done | sed 's/ $//')"
$(for n in "${brokers[@]}"; do echo "export CLUSTER_BROKER_$n=127.0.0.1:$(quic_port "$n")"; done)
EOF
}

# start_broker N starts broker N with its node credential and data directory.
start_broker() {
	local n=$1
	start "broker-$n" env FELIX_NODE_ID="broker-$n" FELIX_CONTROLPLANE_URL="http://127.0.0.1:$cp_port" \
		FELIX_NODE_TOKEN_FILE="$dir/node-$n.token" FELIX_CLUSTER_CA_FILE="$dir/tls/ca.pem" \
		FELIX_TLS_CERT_FILE="$dir/tls/broker.pem" FELIX_TLS_KEY_FILE="$dir/tls/broker-key.pem" \
		FELIX_QUIC_BIND="127.0.0.1:$(quic_port "$n")" FELIX_ADMIN_BIND="127.0.0.1:$(admin_port "$n")" \
		FELIX_DATA_DIR="$dir/data-$n" \
		"$bin/felix-broker"
}

# broker_pid N is the pid up or start last recorded for broker N.
broker_pid() { awk -v name="broker-$1" '$2 == name { pid = $1 } END { print pid }' "$dir/pids" 2>/dev/null; }

# alive PID: the process runs (a killed one its parent has not reaped yet
# is a zombie, which kill -0 still finds).
alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null && [ "$(ps -o stat= -p "$1" | cut -c1)" != Z ]; }

cmd_kill() {
	local pid
	pid=$(broker_pid "$node")
	alive "$pid" || die "broker-$node is not running"
	kill -9 "$pid"
	while alive "$pid"; do sleep 0.05; done
	say "killed broker-$node ($pid) with SIGKILL"
}

cmd_start() {
	[ -f "$dir/pids" ] || die "nothing running in $dir: run scripts/cluster.sh up $dir first"
	local pid
	pid=$(broker_pid "$node")
	if alive "$pid"; then
		die "broker-$node is running ($pid)"
	fi
	[ -f "$dir/logs/broker-$node.log" ] && mv "$dir/logs/broker-$node.log" "$dir/logs/broker-$node.log.prev"
	start_broker "$node"
	wait_for "broker-$node" http_ok "http://127.0.0.1:$(admin_port "$node")/ready"
	say "started broker-$node ($(broker_pid "$node")), logs in $dir/logs/broker-$node.log"
}

cmd_stop() {
	local pid
	pid=$(broker_pid "$node")
	alive "$pid" || die "broker-$node is not running"
	kill -TERM "$pid"
	for _ in $(seq 300); do alive "$pid" || break; sleep 0.1; done
	alive "$pid" && die "broker-$node ($pid) did not exit within 30 s of SIGTERM"
	say "stopped broker-$node ($pid) with SIGTERM"
}

# http_get http://HOST:PORT/PATH prints the answer, headers and body.
http_get() {
	local hp=${1#http://}
	local host=${hp%%:*} rest=${hp#*:}
	local port=${rest%%/*} path=/${rest#*/}
	exec 3<>"/dev/tcp/$host/$port" || return 1
	printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$path" "$host" >&3
	cat <&3
	exec 3>&-
}

# in_sync: every broker answers its metrics, and none leads a replicated
# shard with fewer replicas in sync than the shard's replica set.
in_sync() {
	local n m
	for n in "${brokers[@]}"; do
		m=$(http_get "http://127.0.0.1:$(admin_port "$n")/metrics") || return 1
		[[ $m == *$'\nfelix_raft_under_replicated_shards 0'* ]] || return 1
	done
}

cmd_restart() {
	cmd_stop
	cmd_start
	wait_for "every replica in sync" in_sync
	say "broker-$node is back and every replicated shard is in sync"
}

cmd_down() {
	[ -f "$dir/pids" ] || { say "nothing running in $dir"; return 0; }
	# Brokers first (they leave the cluster), then the control plane, then etcd.
	tac "$dir/pids" | while read -r pid name; do
		if alive "$pid" && kill "$pid" 2>/dev/null; then
			for _ in $(seq 100); do alive "$pid" || break; sleep 0.1; done
			alive "$pid" && kill -9 "$pid" 2>/dev/null
			say "stopped $name ($pid)"
		fi
	done
	rm -f "$dir/pids"
}

cmd_up() {
	[ -f "$dir/pids" ] && die "$dir/pids exists: run scripts/cluster.sh down $dir first"
	mkdir -p "$bin" "$dir/logs"
	chmod 700 "$dir"
	if [ -n "${CLUSTER_PREBUILT:-}" ]; then
		for b in felix-broker felix-controlplane felix-devetcd felix; do ln -sf "$(realpath "$CLUSTER_PREBUILT/$b")" "$bin/$b"; done
	else
		say "building into $bin"
		(cd "$root" && go build -o "$bin/" ./cmd/felix-broker ./cmd/felix-controlplane ./cmd/felix-devetcd ./tools/felix)
	fi
	felix="$bin/felix"

	# 1. etcd.
	if [ -n "${ETCD:-}" ]; then
		start etcd "$ETCD" --data-dir "$dir/etcd" --listen-client-urls "http://127.0.0.1:$etcd_port" \
			--advertise-client-urls "http://127.0.0.1:$etcd_port" --listen-peer-urls "http://127.0.0.1:$((etcd_port + 1))"
	else
		start etcd "$bin/felix-devetcd" --dir "$dir/etcd" --client "127.0.0.1:$etcd_port" --peer "127.0.0.1:$((etcd_port + 1))"
	fi
	wait_for etcd grep -q "ready" "$dir/logs/etcd.log"

	# 2. The control plane, with a bootstrap token and the operator tenant
	#    "ops" whose node credentials register brokers.
	[ -f "$dir/bootstrap.token" ] || (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/bootstrap.token")
	start controlplane env FELIX_CP_STORE=etcd FELIX_CP_ETCD_ENDPOINTS="127.0.0.1:$etcd_port" \
		FELIX_CP_BIND="127.0.0.1:$cp_port" FELIX_CP_BOOTSTRAP_BIND="127.0.0.1:$boot_port" \
		FELIX_CP_BOOTSTRAP_TOKEN_FILE="$dir/bootstrap.token" FELIX_CP_OPERATOR_TENANT=ops \
		"$bin/felix-controlplane"
	wait_for "the control plane" http_ok "http://127.0.0.1:$cp_port/v1/system/health"
	local boot=(--controlplane "http://127.0.0.1:$boot_port" --token-file "$dir/bootstrap.token")
	for t in ops t1; do
		"$felix" admin tenant create "$t" "${boot[@]}" >/dev/null 2>&1 || true # exists from an earlier run
	done
	"$felix" admin namespace create default --tenant t1 "${boot[@]}" >/dev/null 2>&1 || true

	# 3. One CA and one certificate for the three brokers (all on 127.0.0.1).
	[ -f "$dir/tls/broker.pem" ] || "$felix" cert --dir "$dir/tls" --host 127.0.0.1,localhost >/dev/null

	# 4. The brokers, each with its own node credential: it registers, follows
	#    the control plane's feed and authenticates forwarded publishes.
	for n in "${brokers[@]}"; do
		"$felix" token node "${boot[@]}" --subject "broker-$n" --out "$dir/node-$n.token" 2>/dev/null
		start_broker "$n"
	done
	for n in "${brokers[@]}"; do
		wait_for "broker-$n" http_ok "http://127.0.0.1:$(admin_port "$n")/ready"
	done

	# 5. A stream spread over the three, and a client token without an IdP.
	# Create returns once broker-1 serves the stream (--admin; without it the
	# CLI waited 10 s on a broker at the default admin address, none here).
	"$felix" admin stream create demo --tenant t1 --namespace default --shards 3 --admin "127.0.0.1:$(admin_port 1)" "${boot[@]}" >/dev/null 2>&1 || true
	"$felix" token mint "${boot[@]}" --tenant t1 --subject dev --out "$dir/client.token" \
		--grant stream.publish --grant stream.subscribe --grant cache.read --grant cache.write \
		--grant roster.join --grant roster.watch --grant queue.consume 2>/dev/null
	say "up: control plane http://127.0.0.1:$cp_port (bootstrap :$boot_port), brokers 127.0.0.1:$(quic_port 1)-$(quic_port 3), logs in $dir/logs"
	say "try: eval \"\$(scripts/cluster.sh env $dir)\"; \$CLUSTER_BIN/felix pub --addr 127.0.0.1:$(quic_port 2) --ca \$CLUSTER_CA --token \$CLUSTER_TOKEN --stream demo hello"
}

case "$cmd" in
up) cmd_up ;;
down) cmd_down ;;
env) cmd_env ;;
kill) cmd_kill ;;
start) cmd_start ;;
stop) cmd_stop ;;
restart) cmd_restart ;;
*)
	sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
