#!/usr/bin/env bash
# `make run`: Postgres (a private cluster unless DATABASE_URL is set), the
# gateway with embedded NATS (unless NATS_URL is set) and one runner, each
# started again when it exits. Ctrl-C (or SIGTERM to this script, whose pid
# is in .data/run/run.pid) stops everything this script started, quietly.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .data

# Where the private cluster lives: TETHER_PG_DIR if set; else .data/pg when
# it already holds one or when we are not root; as root, a directory of this
# checkout under /var/tmp, because the cluster runs as the postgres user,
# who cannot enter a checkout under a private directory (root's home is mode
# 700 on Debian, as is any mktemp -d).
pg_dir() {
	if [ -n "${TETHER_PG_DIR:-}" ]; then echo "$TETHER_PG_DIR"; return; fi
	if [ -f .data/pg/data/PG_VERSION ] || [ "$(id -u)" != 0 ]; then echo .data/pg; return; fi
	echo "/var/tmp/tether-pg-$(printf %s "$PWD" | sha256sum | cut -c1-12)"
}

started_pg=
if [ -z "${DATABASE_URL:-}" ]; then
	pgdir=$(pg_dir)
	DATABASE_URL=$(scripts/pg.sh start "$pgdir")
	started_pg=1
	echo "run: Postgres at $DATABASE_URL (data in $pgdir; remove it to start afresh)"
fi
export DATABASE_URL

# Each component's pid is kept in .data/run/<name>.pid (TETHER_RUN_DIR
# elsewhere), this script's in run.pid. A component that exits (a crash, a
# kill -9, or `kill $(cat .data/run/gateway.pid)` to restart it, for example
# after `make build`) is started again; the others keep running, so a
# restart is a reconnect for everyone else. Ctrl-C stops everything.
run_dir=${TETHER_RUN_DIR:-.data/run}
mkdir -p "$run_dir"
echo $$ >"$run_dir/run.pid"
declare -A pid_of started_at fast_exits
stopping=
cleanup() {
	trap - EXIT INT TERM
	stopping=1
	for name in "${!pid_of[@]}"; do kill -TERM "${pid_of[$name]}" 2>/dev/null || true; done
	for name in "${!pid_of[@]}"; do wait "${pid_of[$name]}" 2>/dev/null || true; done
	rm -f "$run_dir"/*.pid
	if [ -n "$started_pg" ]; then scripts/pg.sh stop "$pgdir" || true; fi
	echo "run: stopped"
}
trap cleanup EXIT
# Stopping is what Ctrl-C is for here, not a failure: exit 0, so make says
# nothing (an exit of 130 would be "make: *** [run] Error 130").
trap 'exit 0' INT TERM

addr=${TETHER_ADDR:-:8080}
port=${addr##*:}
host=${addr%:*}
[ -z "$host" ] || [ "$host" = "0.0.0.0" ] && host=127.0.0.1

start() {
	local name=$1
	case $name in
	gateway) ./bin/gateway & ;;
	runner) NATS_URL=$runner_nats ./bin/runner & ;;
	esac
	pid_of[$name]=$!
	started_at[$name]=$SECONDS
	echo "${pid_of[$name]}" >"$run_dir/$name.pid"
}

start gateway

# Wait for the gateway to be ready (Postgres migrated, NATS up).
for _ in $(seq 1 600); do
	if ! kill -0 "${pid_of[gateway]}" 2>/dev/null; then
		echo "run: the gateway exited; see its log above" >&2
		exit 1
	fi
	if curl -fsS "http://$host:$port/readyz" >/dev/null 2>&1; then break; fi
	sleep 0.1
done

# The runner reaches the gateway's embedded NATS unless NATS_URL names
# another; the gateway itself must not see it, or a restarted gateway would
# look for an external NATS instead of embedding its own.
runner_nats=${NATS_URL:-nats://${TETHER_NATS_LISTEN:-127.0.0.1:4222}}
start runner

echo
echo "  Tether is running: http://localhost:$port   (Ctrl-C stops everything)"
echo "  Restart one part: kill \$(cat $run_dir/gateway.pid)   (or runner.pid)"
echo

# Start again whatever exits; give up on one that keeps exiting at once.
while [ -z "$stopping" ]; do
	wait -n "${pid_of[@]}" || true
	for name in "${!pid_of[@]}"; do
		kill -0 "${pid_of[$name]}" 2>/dev/null && continue
		# Under set -e a bare wait for a part killed by a signal (137)
		# would end this script and everything with it.
		rc=0
		wait "${pid_of[$name]}" 2>/dev/null || rc=$?
		if [ $((SECONDS - started_at[$name])) -lt 5 ]; then
			fast_exits[$name]=$((${fast_exits[$name]:-0} + 1))
		else
			fast_exits[$name]=0
		fi
		if [ "${fast_exits[$name]}" -ge 3 ]; then
			echo "run: the $name exited 3 times in a row right after starting (status $rc); stopping" >&2
			exit 1
		fi
		echo "run: the $name exited (status $rc); starting it again"
		start "$name"
	done
done
