#!/usr/bin/env bash
# `make run`: Postgres (a private cluster under .data/pg unless DATABASE_URL
# is set), the gateway with embedded NATS (unless NATS_URL is set) and one
# runner. Ctrl-C stops everything this script started.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .data

started_pg=
if [ -z "${DATABASE_URL:-}" ]; then
	DATABASE_URL=$(scripts/pg.sh start .data/pg)
	started_pg=1
	echo "run: Postgres at $DATABASE_URL (data in .data/pg)"
fi
export DATABASE_URL

pids=()
cleanup() {
	trap - EXIT INT TERM
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	if [ -n "$started_pg" ]; then scripts/pg.sh stop .data/pg || true; fi
	echo "run: stopped"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

addr=${TETHER_ADDR:-:8080}
port=${addr##*:}
host=${addr%:*}
[ -z "$host" ] || [ "$host" = "0.0.0.0" ] && host=127.0.0.1

./bin/gateway &
pids+=($!)

# Wait for the gateway to be ready (Postgres migrated, NATS up).
for _ in $(seq 1 600); do
	if ! kill -0 "${pids[0]}" 2>/dev/null; then
		echo "run: the gateway exited; see its log above" >&2
		exit 1
	fi
	if curl -fsS "http://$host:$port/readyz" >/dev/null 2>&1; then break; fi
	sleep 0.1
done

if [ -z "${NATS_URL:-}" ]; then
	export NATS_URL="nats://${TETHER_NATS_LISTEN:-127.0.0.1:4222}"
fi
./bin/runner &
pids+=($!)

echo
echo "  Tether is running: http://localhost:$port   (Ctrl-C stops everything)"
echo

# Stop everything when either process ends.
wait -n "${pids[@]}"
