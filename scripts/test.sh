#!/usr/bin/env bash
# Every check of every language, in one command. Does its own set-up.
# Usage: scripts/test.sh            (what CI runs)
#        LONG=1 scripts/test.sh     (longer randomized runs where supported)
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "toolchain"
command -v cargo >/dev/null || { echo "cargo is required (rustup stable)"; exit 1; }
rustup component add rustfmt clippy >/dev/null 2>&1 || true

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo test (unit, behaviour, model, crash, loop device)"
cargo test --workspace --locked

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

step "fuzz targets, a short run each (FUZZ_SECONDS to run longer)"
command -v cargo-fuzz >/dev/null || cargo install --locked -q cargo-fuzz
for target in superblock_decode tuple_block_decode buddy_allocator store_model store_image; do
  out=$(cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run "$target" -- -max_total_time="${FUZZ_SECONDS:-20}" 2>&1) \
    || { tail -n 40 <<<"$out"; echo "fuzz target $target failed (input in fuzz/artifacts/$target/)"; exit 1; }
  echo "$target: $(grep -E "^Done" <<<"$out" | tail -n 1)"
done

step "doc tests and docs build without warnings"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked -q

step "C API: tests (shared, static, valgrind, AddressSanitizer) and the example"
make -C bindings-c test
make -C examples/c run

step "Python package: pip install ./bindings-python into a fresh venv, then pytest"
VENV=target/py-venv
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
# pytest, fsspec, pandas/pyarrow, s3fs, moto[server]: pinned in the file.
"$VENV/bin/pip" install -q ./bindings-python -r bindings-python/tests/requirements.txt
(cd bindings-python/tests && "../../$VENV/bin/python" -m pytest -q .)
"$VENV/bin/python" examples/python/quickstart.py >/dev/null

step "same code on S3: one object_store routine on blobcask and on moto's S3 server (127.0.0.1); OpenDAL over blobcask"
cargo clippy --locked -q -p blobcask-object-store --all-targets --features s3,opendal -- -D warnings
cargo test --locked -q -p blobcask-object-store --features opendal --test opendal
BLOBCASK_TEST_PYTHON="$PWD/$VENV/bin/python" cargo test --locked -q -p blobcask-object-store --features s3 --test same_code_s3

step "Node package: npm install (builds the addon) and node --test"
(cd bindings-node && npm install --no-audit --no-fund --loglevel=error && npm test)
node examples/node/quickstart.mjs >/dev/null

step "DataFusion runs SQL over Parquet in blobcask (examples/datafusion; answers checked)"
cargo run --locked -q -p blobcask-datafusion-example

step "quickstart demo on this repository"
cargo run --release --locked -q -p blobcask-examples --bin quickstart -- .

echo
echo "all checks passed"
