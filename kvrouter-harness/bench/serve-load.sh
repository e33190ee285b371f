#!/usr/bin/env bash
# The HTTP service load measurement (docs/BENCHMARKS.md, "HTTP service (serve)"):
# starts `kvrouter serve` on 127.0.0.1:18090, fills it with 16 workers' ~1 M blocks, then for
# --duration seconds streams store/remove events through POST /events while wrk sends /query
# with 1,024-token prompts; prints wrk's report and the achieved event rate; stops the server.
# Needs wrk (apt-get install -y wrk). Extra arguments go to `kvrouter bench serve-load`
# (io.kvrouter.harness.ServeLoad; e.g. --duration 60 --wrk-connections 32 --event-rate 150000;
# --help lists them).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
command -v wrk >/dev/null || { echo "serve-load: wrk is not installed (apt-get install -y wrk)" >&2; exit 1; }
. "$root/.mvn/find-jdk.sh"
kvrouter_find_jdk
./kvrouter --version >/dev/null            # builds kvrouter-cli/target/kvrouter.jar if stale
port="${KVROUTER_BENCH_PORT:-18090}"
log="$(mktemp)"
KVROUTER_JAVA_OPTS="${KVROUTER_JAVA_OPTS:--Xms2g -Xmx2g}" ./kvrouter serve --port "$port" >"$log" 2>&1 &
server=$!   # the launcher execs java, so this is the server JVM
trap 'kill -TERM $server 2>/dev/null || true; wait $server 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$port/ready" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -fsS "http://127.0.0.1:$port/ready" >/dev/null || { cat "$log"; exit 1; }
"$JAVA_HOME/bin/java" -Xmx1g -jar kvrouter-cli/target/kvrouter.jar bench serve-load \
  --url "http://127.0.0.1:$port" --lua kvrouter-harness/bench/query.lua --server-pid "$server" "$@"
