#!/bin/sh
# The kubectl tests (test/local/kubectl.test.ts, test/e2e/local-up.test.ts) drive the real
# kubectl against the development API server. Installed here when it can be (Debian's
# kubernetes-client); otherwise those files skip, and this says so once.
set -eu
if command -v kubectl >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "kubectl not found: installing Debian's kubernetes-client with apt-get" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kubernetes-client >/dev/null || true
  command -v kubectl >/dev/null 2>&1 && exit 0
fi
echo "kubectl not found and not installable here: the kubectl tests will be skipped. Install kubectl (https://kubernetes.io/docs/tasks/tools/) to run them." >&2
exit 0
