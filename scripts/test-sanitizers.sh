#!/usr/bin/env bash
# Builds politeproxy with AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/) and
# with ThreadSanitizer (build-tsan/), and runs the unit and integration tests on each.
# A sanitizer report anywhere (a test binary or a proxy the integration tests start)
# fails the run: reports go to files under build-*/sanitizer-logs/, checked at the end.
#   scripts/test-sanitizers.sh [asan|tsan]...       default: both
#   scripts/test-sanitizers.sh --build-only [asan|tsan]...   configure and build, no tests
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=
if [[ "${1:-}" == --build-only ]]; then build_only=1; shift; fi
./scripts/install-deps.sh
kinds=("$@")
[[ ${#kinds[@]} -eq 0 ]] && kinds=(asan tsan)
status=0
option_of() {
  case "$1" in
    asan) echo POLITEPROXY_ASAN ;;
    tsan) echo POLITEPROXY_TSAN ;;
    *) echo "unknown sanitizer build '$1' (asan or tsan)" >&2; exit 2 ;;
  esac
}
# -O1 with line tables only (-g1): what sanitizer reports need, and a third less to
# compile than -O2 -g on this Boost-heavy code. Without NDEBUG: the asserts (the gates'
# own and Boost's) run here, where a broken invariant is worth a failed run.
configure() {
  cmake -S . -B "build-$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" \
    "-D$(option_of "$1")=ON" >/dev/null
}
for kind in "${kinds[@]}"; do option_of "$kind" >/dev/null; configure "$kind"; done
if [[ -n $build_only ]]; then
  for kind in "${kinds[@]}"; do cmake --build "build-$kind" -j 2; done
  exit 0
fi
cmake --build "build-${kinds[0]}" -j 2
for i in "${!kinds[@]}"; do
  kind=${kinds[$i]}
  dir="build-$kind"
  logs="$PWD/$dir/sanitizer-logs"
  # The next tree builds while this one's tests run, at the lowest priority: the tests
  # spend most of their time waiting on sockets and timers, and the build takes only the
  # CPU they leave (a test that needs it gets it first).
  next_build=
  if (( i + 1 < ${#kinds[@]} )); then
    nice -n 19 cmake --build "build-${kinds[$((i + 1))]}" -j 2 >"build-${kinds[$((i + 1))]}/build.log" 2>&1 &
    next_build=$!
  fi
  rm -rf "$logs" && mkdir -p "$logs"
  export ASAN_OPTIONS="log_path=$logs/asan:detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0"
  export UBSAN_OPTIONS="log_path=$logs/ubsan:print_stacktrace=1:halt_on_error=1"
  export TSAN_OPTIONS="log_path=$logs/tsan:halt_on_error=0:second_deadlock_stack=1"
  # Sanitized binaries run slower: the per-test limits of ctest (tests/integration's
  # CMakeLists.txt) and of the harness stretch by the same factor.
  # Tests labelled `external` check the proxy against other programs (Chromium, Prometheus,
  # the client recipes, the container files): they run in the plain build only; so do
  # tests labelled `long` (minutes of timed load: the fair-share figures), whose logic the
  # sanitized unit tests cover (fair_share_test, host_gates_clients_test).
  if ! POLITEPROXY_SLOW=3 ctest --test-dir "$dir" --output-on-failure --timeout 180 -LE "external|long" -j2; then status=1; fi
  if compgen -G "$logs/*" >/dev/null; then
    echo "== $kind: sanitizer reports ==" >&2
    for f in "$logs"/*; do echo "--- $f" >&2; head -60 "$f" >&2; done
    status=1
  else
    echo "== $kind: no sanitizer reports ==" >&2
  fi
  unset ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS
  if [[ -n $next_build ]] && ! wait "$next_build"; then
    echo "== the build of build-${kinds[$((i + 1))]} failed ==" >&2
    cat "build-${kinds[$((i + 1))]}/build.log" >&2
    exit 1
  fi
done
exit $status
