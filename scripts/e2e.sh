#!/usr/bin/env bash
# Runs the browser end-to-end suite (frontend/e2e/) against the real system:
# each scenario starts its own Postgres database on TEST_DATABASE_URL's
# server, a gateway from bin/gateway, a runner from bin/runner, and headless
# Chromium. Run it through `make test-e2e` (which builds first and provides
# TEST_DATABASE_URL), or by hand:
#
#   make build && ./scripts/with-test-pg.sh ./scripts/e2e.sh
#
# Screenshots of every scenario's end state go to test-artifacts/e2e/*.png,
# process and browser logs to test-artifacts/e2e/logs/. Arguments, if any,
# replace the default file list (e.g. frontend/e2e/01-reload-mid-stream.test.mjs).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${TEST_DATABASE_URL:-}" ]; then
	echo "e2e: TEST_DATABASE_URL is not set; run ./scripts/with-test-pg.sh ./scripts/e2e.sh (or make test-e2e)" >&2
	exit 1
fi
for b in bin/gateway bin/runner; do
	if [ ! -x "$b" ]; then
		echo "e2e: $b is missing; run make build first" >&2
		exit 1
	fi
done
command -v psql >/dev/null || { echo "e2e: psql is needed (apt-get install -y postgresql-client)" >&2; exit 1; }
./scripts/ensure-chromium.sh
./scripts/ensure-node-deps.sh

rm -rf test-artifacts/e2e
mkdir -p test-artifacts/e2e/logs
# One scenario at a time: each runs Postgres work, two Go processes and a
# browser, and the machines have two cores.
if [ $# -eq 0 ]; then set -- frontend/e2e/; fi
exec node --test --test-concurrency=1 --test-reporter=spec "$@"
