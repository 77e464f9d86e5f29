#!/bin/sh
# Tests spawn their own redis-server (see test/support/redis-server.ts), so the binary must exist
# even when REDIS_URL points at a running server.
set -eu
if command -v redis-server >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "redis-server not found: installing it with apt-get" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  # The package may start a system instance on 6379; tests never use it, so leave it alone.
  command -v redis-server >/dev/null 2>&1 && exit 0
fi
echo "redis-server is required by the tests. Install it (Debian/Ubuntu: sudo apt-get install -y redis-server; macOS: brew install redis) and run make test again." >&2
exit 1
