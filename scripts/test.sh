#!/usr/bin/env bash
# Every check of every language, in one command. Does its own set-up.
# Usage: scripts/test.sh            (what CI runs)
#        scripts/test.sh --quick    (the core's edit loop, a few minutes:
#                                    fmt, clippy and every test of the core
#                                    crate; nothing else)
#        LONG=1 scripts/test.sh     (longer randomized runs where supported)
# Each step prints its duration; the run ends with a table of them.
set -euo pipefail
cd "$(dirname "$0")/.."

QUICK=0
for arg in "$@"; do
  case $arg in
    --quick) QUICK=1 ;;
    *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
  esac
done

# Step timing: `step` closes the previous step and opens the next; the EXIT
# trap closes the last one and prints every step's duration and the total
# (also when a step fails, naming it).
STEP_NAMES=() STEP_SECS=() STEP_NAME="" STEP_START=0 RUN_START=$SECONDS
end_step() {
  [ -n "$STEP_NAME" ] || return 0
  local took=$((SECONDS - STEP_START))
  STEP_NAMES+=("$STEP_NAME") STEP_SECS+=("$took")
  printf '    (%dm%02ds)\n' $((took / 60)) $((took % 60))
  STEP_NAME=""
}
step() { end_step; STEP_NAME=$1; STEP_START=$SECONDS; printf '\n==> %s\n' "$*"; }
summary() {
  local rc=$? failed=$STEP_NAME i
  # Temporary directories a step registered for removal (the Node step's).
  [ -z "${CLEANUP_DIR:-}" ] || rm -rf "$CLEANUP_DIR"
  end_step
  printf '\n%-8s %s\n' "time" "step"
  for i in "${!STEP_NAMES[@]}"; do
    printf '%3dm%02ds  %s\n' $((STEP_SECS[i] / 60)) $((STEP_SECS[i] % 60)) "${STEP_NAMES[i]:0:100}"
  done
  local total=$((SECONDS - RUN_START))
  printf '%3dm%02ds  total%s\n' $((total / 60)) $((total % 60)) "$([ "$QUICK" = 1 ] && echo ' (--quick)')"
  [ "$rc" -eq 0 ] || printf 'FAILED in step: %s\n' "$failed"
}
trap summary EXIT
file_size() { numfmt --to=iec-i --suffix=B "$(stat -c %s "$1")"; }
# Fails unless the ELF file has no DWARF (.debug_*) sections and no symbol table.
no_debug_info() {
  local sections
  sections=$(readelf -SW "$1")
  if grep -qE ' \.(debug_[a-z_]+|zdebug_[a-z_]+|symtab) ' <<<"$sections"; then
    echo "$1 carries debug info or a symbol table:"; grep -E '\.(z?debug_|symtab)' <<<"$sections"; return 1
  fi
  echo "$(basename "$1"): $(file_size "$1"), no .debug_* sections, no .symtab"
}
# PATH without any directory holding cargo or rustc: what a user of the
# shipped wheel and npm tarball has.
NOCARGO_PATH=$(tr ':' '\n' <<<"$PATH" | while IFS= read -r d; do
  [ -n "$d" ] && [ ! -e "$d/cargo" ] && [ ! -e "$d/rustc" ] && printf '%s:' "$d"; done)
NOCARGO_PATH=${NOCARGO_PATH%:}

step "toolchain"
command -v cargo >/dev/null || { echo "cargo is required (rustup stable)"; exit 1; }
rustup component add rustfmt clippy >/dev/null 2>&1 || true

step "cargo fmt --check; benches/RESULTS.md is what benches/results.py makes of the recorded figures"
cargo fmt --all -- --check
python3 benches/results.py --check

if [ "$QUICK" = 1 ]; then
  step "cargo clippy -p blobcask (warnings are errors)"
  cargo clippy -p blobcask --all-targets --locked -- -D warnings
  step "cargo test -p blobcask (unit, behaviour, model, crash, corruption, loop device)"
  cargo test -p blobcask --locked
  echo
  echo "quick checks passed (the other crates, loom, stresser, fuzz, docs, C, Python, Node, S3 and the demo: run without --quick)"
  exit 0
fi

step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo test (unit, behaviour, model, crash, loop device; DataFusion runs SQL over Parquet in blobcask, answers checked)"
cargo test --workspace --locked

step "blobcask-object-store on object_store 0.14: clippy, its tests (object_store's conformance suites on 0.14; the run above is 0.13) and docs"
# One more build of that crate and its test binaries (not of the workspace:
# the core keeps the workspace's tokio features, see core/Cargo.toml).
cargo clippy --locked -q -p blobcask-object-store --all-targets --no-default-features --features object_store_014 -- -D warnings
cargo test --locked -q -p blobcask-object-store --no-default-features --features object_store_014
RUSTDOCFLAGS="-D warnings" cargo doc --locked -q -p blobcask-object-store --no-deps --no-default-features --features object_store_014

step "criterion micro benches in test mode (each runs once; no timing)"
micro=$(cargo test --locked -q -p blobcask-bench -p blobcask-object-store --benches 2>&1) || { echo "$micro"; exit 1; }
echo "micro benches passed: $(grep -c '^Success' <<<"$micro")"

step "comparison engines compile (SQLite, fjall, LMDB, redb features; RocksDB stays out: ~50 min build)"
cargo clippy --locked -q -p blobcask-bench --all-targets --features sqlite,fjall,lmdb,redb -- -D warnings

step "loom models of the reclaim, group-commit, io_uring completion (D2, D3) and event-loop wake-up (L1) protocols (and their broken variants)"
# The filter `loom_model` matches `store::loom_models`, `io::uring::loom_model` and `event_loop::loom_model`.
RUSTFLAGS="--cfg blobcask_loom" CARGO_TARGET_DIR=target/loom cargo test --locked -p blobcask --release --lib loom_model -- --nocapture 2>&1 | grep -E "loom explored|test result"

step "stochastic stresser (seeded; STRESS_SECONDS to run longer)"
cargo build --release --locked -q -p blobcask-stress
target/release/blobcask-stress --seconds "${STRESS_SECONDS:-10}" --seed 1 --engine io_uring --index hash
target/release/blobcask-stress --seconds "${STRESS_SECONDS:-10}" --seed 2 --engine portable --index fst

step "fuzz targets, a short run each, two at a time (FUZZ_SECONDS to run longer)"
command -v cargo-fuzz >/dev/null || cargo install --locked -q cargo-fuzz
# One build of every target, then the runs (each one process on one core)
# in pairs: the same time per target in about half the wall time.
(cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz build)
fuzz_one() {
  local out
  out=$(cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run "$1" -- -max_total_time="${FUZZ_SECONDS:-20}" 2>&1) \
    || { tail -n 40 <<<"$out"; echo "fuzz target $1 failed (input in fuzz/artifacts/$1/)"; return 1; }
  echo "$1: $(grep -E "^Done" <<<"$out" | tail -n 1)"
}
set -- superblock_decode tuple_block_decode buddy_allocator store_model store_image
fuzz_failed=0
while [ $# -gt 0 ]; do
  fuzz_one "$1" & first=$!
  second=""
  if [ $# -gt 1 ]; then fuzz_one "$2" & second=$!; fi
  wait "$first" || fuzz_failed=1
  [ -z "$second" ] || wait "$second" || fuzz_failed=1
  shift $(($# > 1 ? 2 : 1))
done
[ "$fuzz_failed" = 0 ] || exit 1

step "doc tests and docs build without warnings"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked -q

step "C API: tests (shared, static, valgrind with its default leak kinds, AddressSanitizer), an install to a temporary PREFIX built against with pkg-config, and the example"
make -C bindings-c test
make -C examples/c run

step "Python package: an abi3 wheel (stripped), installed in a fresh venv with no cargo on PATH, then pytest"
# One wheel, built by maturin (the PEP 517 backend; pip fetches it into an
# isolated build environment). `--compatibility pypi` tags it manylinux_X_Y
# from the glibc symbols it uses (pip's default is linux_x86_64), and fails if
# no uploadable tag fits. strip = true (pyproject) links it without debug info.
rm -rf target/wheels target/py-build
python3 -m venv target/py-build
MATURIN_PEP517_ARGS="--compatibility pypi" target/py-build/bin/pip wheel -q --no-deps -w target/wheels ./bindings-python
rm -rf target/py-build
wheels=(target/wheels/blobcask-*-cp311-abi3-*.whl)
[ ${#wheels[@]} -eq 1 ] && [ -f "${wheels[0]}" ] || { echo "expected one cp311-abi3 wheel, got: $(ls target/wheels)"; exit 1; }
wheel=${wheels[0]}
echo "wheel: $(basename "$wheel") ($(file_size "$wheel"))"
# The fresh venv that the suite (and the later steps) use: it sees the wheel
# and PyPI, never cargo or the source tree.
VENV=target/py-venv
rm -rf "$VENV"
python3 -m venv "$VENV"
PY_PATH="$PWD/$VENV/bin:$NOCARGO_PATH"
env PATH="$PY_PATH" sh -c '! command -v cargo && ! command -v rustc' >/dev/null || { echo "cargo is reachable from the Python test PATH"; exit 1; }
env PATH="$PY_PATH" "$VENV/bin/pip" install -q --upgrade pip
# pytest, fsspec, pandas/pyarrow, s3fs, moto[server]: pinned in the file.
env PATH="$PY_PATH" "$VENV/bin/pip" install -q "$wheel" -r bindings-python/tests/requirements.txt
native=$(cd bindings-python/tests && env PATH="$PY_PATH" "../../$VENV/bin/python" -c 'import blobcask._native as m; print(m.__file__)')
[[ $native == "$PWD/$VENV/"* ]] || { echo "blobcask imported from $native, not from the venv"; exit 1; }
no_debug_info "$native"
(cd bindings-python/tests && env PATH="$PY_PATH" "../../$VENV/bin/python" -m pytest -q .)
env PATH="$PY_PATH" "$VENV/bin/python" examples/python/quickstart.py >/dev/null

step "Python types: mypy --strict on the package, stubtest of the stubs against the installed wheel"
env PATH="$PY_PATH" "$VENV/bin/pip" install -q mypy==2.4.1
(cd bindings-python/python && env PATH="$PY_PATH" "../../$VENV/bin/mypy" -p blobcask)
(cd bindings-python && env PATH="$PY_PATH" "../$VENV/bin/python" -m mypy.stubtest blobcask \
  --mypy-config-file pyproject.toml --allowlist stubtest-allowlist.txt)

step "same code on S3: one object_store routine on blobcask and on moto's S3 server (127.0.0.1); the cache tier in front of moto; OpenDAL over blobcask"
cargo clippy --locked -q -p blobcask-object-store --all-targets --features s3,opendal -- -D warnings
# The cache tier's DataFusion measurement (a binary needing the s3 feature).
cargo clippy --locked -q -p blobcask-datafusion-example --all-targets --features s3 -- -D warnings
cargo test --locked -q -p blobcask-object-store --features opendal --test opendal
BLOBCASK_TEST_PYTHON="$PWD/$VENV/bin/python" cargo test --locked -q -p blobcask-object-store --features s3 --test same_code_s3 --test cached_s3

step "Node package: npm ci (builds the addon), npm pack, the tarball installed outside the repository with no cargo on PATH, node --test there"
(cd bindings-node && npm ci --no-audit --no-fund --loglevel=error)
node examples/node/quickstart.mjs >/dev/null
NODE_PKG=$(mktemp -d "${TMPDIR:-/tmp}/blobcask-npm.XXXXXX")
CLEANUP_DIR=$NODE_PKG
# prepack rebuilds the addon (a no-op here) so the tarball never ships a stale one.
(cd bindings-node && npm pack --loglevel=error --pack-destination "$NODE_PKG" >/dev/null)
tarballs=("$NODE_PKG"/blobcask-*.tgz)
[ ${#tarballs[@]} -eq 1 ] && [ -f "${tarballs[0]}" ] || { echo "npm pack made no tarball"; exit 1; }
tarball=${tarballs[0]}
echo "tarball: $(basename "$tarball") ($(file_size "$tarball")): $(tar -tzf "$tarball" | sed 's|^package/||' | sort | tr '\n' ' ')"
env PATH="$NOCARGO_PATH" sh -c '! command -v cargo && ! command -v rustc' >/dev/null || { echo "cargo is reachable from the Node test PATH"; exit 1; }
# Its install script must find the prebuilt addon, not build (no cargo here).
mkdir "$NODE_PKG/app"
echo '{ "name": "blobcask-install-check", "private": true }' >"$NODE_PKG/app/package.json"
(cd "$NODE_PKG/app" && env PATH="$NOCARGO_PATH" npm install --no-audit --no-fund --loglevel=error --foreground-scripts "$tarball")
installed="$NODE_PKG/app/node_modules/blobcask"
no_debug_info "$installed"/blobcask.*.node
# The suite imports '../lib.mjs': a copy of test/ inside the installed package
# runs it against the installed files.
cp -r bindings-node/test "$installed/test"
(cd "$installed" && env PATH="$NOCARGO_PATH" npm test)
rm -rf "$NODE_PKG"
CLEANUP_DIR=""

step "quickstart demo on this repository"
cargo run --release --locked -q -p blobcask-examples --bin quickstart -- .

echo
echo "all checks passed"
