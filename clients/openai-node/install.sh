#!/usr/bin/env bash
# Installs the official OpenAI JavaScript SDK, exactly as package-lock.json pins it, into
# clients/openai-node/node_modules (about 14 MB). kvrouter-sim's OpenAiNodeSdkTest runs
# sdk-check.mjs with it against a mock engine; .ci/run runs this script. Idempotent: `npm ci` only
# when node_modules is missing or older than the lock file.
set -euo pipefail
cd "$(dirname "$0")"
for tool in node npm; do
  command -v "$tool" >/dev/null || {
    echo "ERROR: clients/openai-node/install.sh: '$tool' is not on PATH. The OpenAI SDK test runs" >&2
    echo "Node 20+; install Node.js and npm (e.g. apt-get install -y nodejs npm)." >&2
    exit 1
  }
done
if [ -f node_modules/openai/package.json ] && [ node_modules/.package-lock.json -nt package-lock.json ]; then
  echo "openai-node: npm packages already installed (clients/openai-node/node_modules)"
  exit 0
fi
echo "openai-node: npm ci (the openai SDK, about 14 MB; once)"
if ! npm ci --ignore-scripts --no-audit --no-fund --loglevel=error; then
  echo "ERROR: clients/openai-node/install.sh: 'npm ci' failed. It needs the npm registry (no network?" >&2
  echo "a proxy?). The package and its version are in clients/openai-node/package-lock.json." >&2
  exit 1
fi
