#!/usr/bin/env bash
# Makes sure Node.js and the npm packages of the frontend and of the AI SDK
# example (examples/ai-sdk-chat, built by end-to-end scenario 18) are there.
# Installs the packages from each lock file; Node itself must come from the
# system.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	echo "ensure-node-deps: Node.js 20+ and npm are needed to build the UI." >&2
	echo "  Debian/Ubuntu: apt-get install -y nodejs npm (or use NodeSource / nvm for Node 20+)." >&2
	exit 1
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
	echo "ensure-node-deps: Node.js $(node --version) is too old; the UI build needs 20 or newer." >&2
	exit 1
fi
# Reinstall when the lock file changed since the last install.
for dir in frontend examples/ai-sdk-chat; do
	if [ ! -f "$dir/node_modules/.package-lock.json" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
		(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
	fi
done
