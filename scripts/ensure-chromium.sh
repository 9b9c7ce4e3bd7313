#!/usr/bin/env bash
# Makes sure a Chromium for the browser end-to-end tests is there. It must be
# the system's (Debian's `chromium` package): playwright-core drives it, and
# npm never downloads a browser. As root with apt-get it installs the package;
# otherwise it says what to install. Exits non-zero when Chromium is missing.
# TETHER_CHROMIUM overrides the path (default /usr/bin/chromium).
set -euo pipefail
path=${TETHER_CHROMIUM:-/usr/bin/chromium}

if [ -x "$path" ]; then
	exit 0
fi
if [ "$path" = /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	echo "ensure-chromium: $path not found; installing the chromium package" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq chromium >&2
	if [ -x "$path" ]; then
		exit 0
	fi
fi
echo "ensure-chromium: $path not found. The end-to-end tests need Debian's Chromium:" >&2
echo "  sudo apt-get update && sudo apt-get install -y chromium" >&2
echo "  (or set TETHER_CHROMIUM to another Chromium/Chrome executable)" >&2
exit 1
