#!/usr/bin/env bash
# Builds politeproxy and runs it on conf/politeproxy.yaml (proxy on 127.0.0.1:3128,
# admin on 127.0.0.1:9464). Extra arguments go to politeproxy, e.g. --log-level debug.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
exec build/politeproxy --config conf/politeproxy.yaml "$@"
