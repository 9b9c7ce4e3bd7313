#!/usr/bin/env bash
# Runs a command with TEST_DATABASE_URL pointing at a Postgres server: the one
# already given, or a throwaway cluster in a temporary directory that is
# stopped and removed when the command ends, whatever its outcome.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

if [ -n "${TEST_DATABASE_URL:-}" ]; then
	exec "$@"
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/tether-test-pg.XXXXXX")
chmod 755 "$dir"
cleanup() {
	"$here/pg.sh" stop "$dir" || true
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Tests run with fsync off (a throwaway cluster); benchmarks set
# TETHER_PG_FSYNC=on to measure what a real server pays for a commit.
mode=fast
[ "${TETHER_PG_FSYNC:-off}" = on ] && mode=
TEST_DATABASE_URL=$("$here/pg.sh" start "$dir" $mode)
export TEST_DATABASE_URL
echo "with-test-pg: throwaway Postgres at $TEST_DATABASE_URL" >&2
set +e
"$@"
rc=$?
set -e
exit $rc
