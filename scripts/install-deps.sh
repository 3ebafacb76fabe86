#!/usr/bin/env bash
# Installs, from Debian 12's archive, whatever politeproxy needs to build and test that
# is not already installed. Run as root (or with sudo available).
set -euo pipefail

packages=(
  g++ cmake ninja-build ccache make pkg-config
  libboost1.81-dev libboost-url1.81-dev libyaml-cpp-dev prometheus-cpp-dev doctest-dev libssl-dev libnghttp2-dev libhiredis-dev libcrypt-dev libpsl-dev publicsuffix libc-ares-dev
  libgoogle-perftools-dev  # tcmalloc_minimal, the allocator (CMakeLists.txt POLITEPROXY_TCMALLOC)
  curl openssl python3 python3-requests python3-yaml prometheus clang
  haproxy  # test_hostile_input_{framing,heads}.py: the HTTP/1.1 differential (skipped without it)
  python3-httpx python3-aiohttp python3-scrapy  # test_intercept_clients.py: real crawlers through interception
  python3-cryptography  # test_origin_certificates.py: expired and misnamed origin certificates
  chromium libnss3-tools  # test_status_page.py, test_client_recipes.py: headless Chromium (certutil: its CA store)
  wget golang-go  # test_client_recipes.py: the README's client recipes
  python3-h2  # test_h2c.py, test_h2_origin.py, test_h2_abuse.py: an HTTP/2 client and origin
  redis-server python3-redis  # the fleet store: tests start their own on loopback (tests/integration/test_fleet_*.py)
  # Real parent proxies (tests/integration/test_parent_*.py): squid-openssl is Squid 5.7 with
  # ssl_bump (it replaces the squid package; plain proxying is the same)
  squid-openssl tinyproxy
  dnsmasq-base  # test_dns_*.py: a DNS server on a loopback port, records from a file the test writes
)
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(wrk nginx-light libnginx-mod-http-echo valgrind mitmproxy)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
echo "installing: ${missing[*]}" >&2
$sudo apt-get update -qq
# policy-rc.d keeps packaged daemons (prometheus, nginx, ...) from starting on install.
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
  $sudo chmod +x /usr/sbin/policy-rc.d
  trap '$sudo rm -f /usr/sbin/policy-rc.d' EXIT
fi
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
