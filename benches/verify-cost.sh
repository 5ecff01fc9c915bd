#!/usr/bin/env bash
# Cost of checksumming every byte (format 2) against the previous format
# (format 1, commit b858b01, which verified nothing), in one run: both
# bench binaries run alternately on the same disk, each phase ROUNDS times,
# and each figure is reported as the median of its rounds, absolute and as
# a ratio to the raw baseline measured in the same binary run, old next to
# new. (Read the absolute column too: the raw baseline reads a fixed file
# region, and a layout change can put unwritten, fallocated space in it,
# which reads without touching the device.)
#
#   benches/verify-cost.sh [ROUNDS]        (default 3; ~10 min)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
OLD_COMMIT=b858b01
OUT=target/verify-cost
mkdir -p "$OUT"
if [ ! -x target/verify-cost-old/target/release/blobcask-bench ]; then
  rm -rf target/verify-cost-old
  git worktree add -f --detach target/verify-cost-old "$OLD_COMMIT" >/dev/null
  # The old build has no `space` phase: give it the same one (public API only).
  python3 - <<'PY'
new = open('benches/src/bench/space.rs').read()
fn = new[new.index('/// Space used per byte of values'):] + '\n'
p = 'target/verify-cost-old/benches/src/main.rs'
s = open(p).read()
s = s.replace('        if cfg.phase.as_deref().is_none_or(|p| p == "fs") {',
              '        if cfg.phase.as_deref() == Some("space") {\n            space_phase(&cfg).await;\n        }\n'
              '        if cfg.phase.as_deref().is_none_or(|p| p == "fs") {')
s = s.replace('async fn read_phase(cfg: &Config, engine: IoEngineKind) {',
              fn + 'async fn read_phase(cfg: &Config, engine: IoEngineKind) {')
open(p, 'w').write(s)
PY
  (cd target/verify-cost-old && CARGO_TARGET_DIR="$PWD/target" cargo build --release -q -p blobcask-bench --bin blobcask-bench)
fi
cargo build --release -q --locked -p blobcask-bench --bin blobcask-bench
OLD=target/verify-cost-old/target/release/blobcask-bench
NEW=target/release/blobcask-bench
for r in $(seq 1 "$ROUNDS"); do
  for phase in read depth upload space; do
    for which in old new; do
      bin=$OLD; [ $which = new ] && bin=$NEW
      echo "round $r: $phase ($which)" >&2
      "$bin" --dir "$OUT/dir" --phase "$phase" --engine io_uring > "$OUT/$which-$phase-$r.txt"
    done
  done
done
rm -rf "$OUT/dir"
python3 - "$OUT" "$ROUNDS" <<'PY'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def rows(which, phase, r):
    return open(f"{out}/{which}-{phase}-{r}.txt").read().splitlines()
def cell(lines, start, col):
    for l in lines:
        if l.startswith('| ' + start):
            return float(l.split('|')[col].strip())
    raise SystemExit(f"no row {start!r}")
figs = {
    'read': [('4 KiB range read p50 µs, async', 'Store::read (async), 4 KiB', 2, 4),
             ('4 KiB range read p50 µs, blocking', 'blocking::Store::read', 2, 4),
             ('4 KiB range read p50 µs, any offset', 'Store::read, any offset', 2, 4),
             ('raw pread p50 µs (baseline)', 'raw pread', 2, 4)],
    'depth': [('4 KiB reads, 64 in flight, IOPS', 'Store::read (async), 64', 2, 4),
              ('64 pread threads IOPS (baseline)', '64 threads', 2, 4)],
    'upload': [('upload of 64 MiB objects, MiB/s', 'Store::put', 2, 4)],
    'space': [('space amplification, 4 KiB objects', '4096 ', 3, None),
              ('space amplification, 16 KiB objects', '16384 ', 3, None)],
}
print("| figure | format 1 (unverified) | format 2 (verified) | 2 / 1 | ratio to raw, format 1 | ratio to raw, format 2 | 2 / 1 |")
print("|---|---|---|---|---|---|---|")
def med(which, phase, row, col):
    return statistics.median(cell(rows(which, phase, r), row, col) for r in range(1, rounds + 1))
for phase, items in figs.items():
    for name, row, col, rcol in items:
        a, b = med('old', phase, row, col), med('new', phase, row, col)
        line = f"| {name} | {a:.4g} | {b:.4g} | {b / a:.3f} |"
        if rcol:
            ra, rb = med('old', phase, row, rcol), med('new', phase, row, rcol)
            line += f" {ra:.2f} | {rb:.2f} | {rb / ra:.3f} |"
        else:
            line += " | | |"
        print(line)
PY
