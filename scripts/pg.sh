#!/usr/bin/env bash
# A private Postgres cluster from the system's binaries, for `make run` and
# `make test` when DATABASE_URL / TEST_DATABASE_URL is not set.
#
#   scripts/pg.sh start DIR [fast]  start (initialising if needed) the cluster in DIR;
#                                   prints its URL on stdout. "fast" turns fsync off
#                                   (throwaway test clusters only).
#   scripts/pg.sh stop DIR          stop it (no-op when not running)
#   scripts/pg.sh url DIR           print the URL of the running cluster
#
# Postgres refuses to run as root, so as root the cluster runs as the
# `postgres` system user. The port is chosen free at first start and kept in
# DIR/port, so a second cluster never collides with a running one.
set -euo pipefail

die() { echo "pg.sh: $*" >&2; exit 1; }

find_bin() {
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r) "$(dirname "$(command -v pg_ctl 2>/dev/null || echo /nonexistent/x)")"; do
		if [ -x "$d/pg_ctl" ] && [ -x "$d/initdb" ] && [ -x "$d/psql" ] && [ -x "$d/createdb" ]; then echo "$d"; return; fi
	done
}

ensure_bin() {
	BIN=$(find_bin)
	if [ -z "$BIN" ]; then
		if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
			echo "pg.sh: Postgres server binaries not found; installing the postgresql package" >&2
			DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
			BIN=$(find_bin)
		fi
		[ -n "$BIN" ] || die "Postgres server binaries (initdb, pg_ctl) not found. Install them: sudo apt-get install -y postgresql (Debian/Ubuntu), or set DATABASE_URL / TEST_DATABASE_URL to an existing server."
	fi
}

# as runs a command as the cluster's owner: postgres when we are root, from
# / (it may not be allowed into the current directory; every path is absolute).
as() {
	if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pick_port() {
	local p tries=0
	while :; do
		p=$((20000 + RANDOM % 20000))
		port_busy "$p" || { echo "$p"; return; }
		tries=$((tries + 1))
		[ "$tries" -lt 200 ] || die "no free port found"
	done
}

url() { echo "postgres://postgres@127.0.0.1:$(cat "$1/port")/tether?sslmode=disable"; }

start() {
	local dir=$1 fast=${2:-}
	ensure_bin
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	if [ "$(id -u)" = 0 ]; then
		id postgres >/dev/null 2>&1 || die "the postgres system user is missing (it comes with the postgresql package)"
		chown postgres "$dir"
		runuser -u postgres -- test -w "$dir" || die "user postgres cannot write $dir (a parent directory is not searchable); set TETHER_PG_DIR (make run) or DATABASE_URL"
	fi
	if [ ! -f "$dir/data/PG_VERSION" ]; then
		as "$BIN/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 ||
			die "initdb failed; see $dir/initdb.log"
	fi
	mkdir -p "$dir/sock"
	[ "$(id -u)" = 0 ] && chown postgres "$dir/sock"
	if as "$BIN/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
		url "$dir"
		return
	fi
	if [ ! -f "$dir/port" ] || port_busy "$(cat "$dir/port")"; then pick_port >"$dir/port"; fi
	local opts="-p $(cat "$dir/port") -k $dir/sock -c listen_addresses=127.0.0.1 -c max_connections=200"
	[ "$fast" = fast ] && opts="$opts -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	as "$BIN/pg_ctl" -D "$dir/data" -o "$opts" -l "$dir/server.log" -w -t 60 start >/dev/null ||
		die "Postgres did not start; see $dir/server.log"
	as "$BIN/psql" -h 127.0.0.1 -p "$(cat "$dir/port")" -U postgres -d postgres -qtAc \
		"SELECT 1 FROM pg_database WHERE datname='tether'" | grep -q 1 ||
		as "$BIN/createdb" -h 127.0.0.1 -p "$(cat "$dir/port")" -U postgres tether
	url "$dir"
}

stop() {
	local dir=$1
	[ -f "$dir/data/PG_VERSION" ] || return 0
	dir=$(cd "$dir" && pwd)
	ensure_bin
	if as "$BIN/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
		as "$BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
	fi
}

case "${1:-}" in
start) start "${2:?DIR}" "${3:-}" ;;
stop) stop "${2:?DIR}" ;;
url) url "${2:?DIR}" ;;
*) die "usage: pg.sh start|stop|url DIR" ;;
esac
