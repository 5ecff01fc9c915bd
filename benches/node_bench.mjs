// Node binding costs, in one run:
//  * awaited get of cold data vs readFileSync of the same bytes from a file
//    per object (page cache dropped first when permitted: run as root);
//  * puts issued in one tick vs one at a time (group commit);
//  * getSync of 1 MiB (results cross as Buffers over the engine's memory);
//  * an awaited 16 KiB get against getSync of the same objects (both direct
//    I/O, interleaved, so the ratio is the cost of the async path), and 64
//    awaited 16 KiB gets in flight at once; the same for 1 MiB objects;
//  * 500 durable 16 KiB puts issued in one tick against lmdb-js's (when
//    lmdb-js is found);
//  * warm 16 KiB and 1 MiB getSync (read-cache hits) against lmdb-js
//    getBinary of the same values, interleaved (when lmdb-js is found: LMDB_JS_DIR names a
//    directory where `npm install lmdb` ran);
//  * the event loop's delay (monitorEventLoopDelay, 1 ms resolution) while
//    48 MiB gets are awaited, while 48 MiB puts are awaited (a put of 1 MiB
//    or more writes from the caller's Buffer, uncopied, on a helper thread),
//    idle, and while a `dd iflag=direct` process
//    reads as many bytes of the file (the machine's floor).
//
//   (cd bindings-node && npm install --no-audit --no-fund)
//   node benches/node_bench.mjs [DIR]
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { execSync, spawn } from 'node:child_process'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { createRequire } from 'node:module'
import { Store } from '../bindings-node/lib.mjs'

const dir = process.argv[2] ?? 'target/bench/node'
rmSync(dir, { recursive: true, force: true })
mkdirSync(join(dir, 'files'), { recursive: true })
const N = 2000
const SIZE = 16 * 1024
const store = await Store.open(join(dir, 'store.blobcask'), { capacity: 512 * 1024 * 1024 })
const value = randomBytes(SIZE)
await Promise.all(Array.from({ length: N }, (_, i) => store.put(`obj/${i}`, value)))
for (let i = 0; i < N; i++) writeFileSync(join(dir, 'files', `obj-${i}`), value)

let dropped = false
try {
  execSync('sync && echo 3 > /proc/sys/vm/drop_caches', { stdio: 'ignore' })
  dropped = true
} catch {}

const median = (a) => a.sort((x, y) => x - y)[a.length >> 1]
const order = Array.from({ length: N }, (_, i) => i).sort(() => Math.random() - 0.5)
const files = []
for (const i of order.slice(0, 1000)) {
  const t = process.hrtime.bigint()
  readFileSync(join(dir, 'files', `obj-${i}`))
  files.push(Number(process.hrtime.bigint() - t) / 1000)
}
const gets = []
for (const i of order.slice(1000)) {
  const t = process.hrtime.bigint()
  await store.get(`obj/${i}`)
  gets.push(Number(process.hrtime.bigint() - t) / 1000)
}
console.log(
  `16 KiB, median: readFileSync ${median(files).toFixed(1)} us (page cache ${dropped ? 'dropped' : 'NOT dropped'}), ` +
    `await store.get ${median(gets).toFixed(1)} us (direct I/O) -> ${(median(gets) / median(files)).toFixed(2)} x`,
)

const M = 500
let t = process.hrtime.bigint()
for (let i = 0; i < M; i++) await store.put(`seq/${i}`, value)
const seq = M / (Number(process.hrtime.bigint() - t) / 1e9)
const g0 = store.stats().commitGroups
t = process.hrtime.bigint()
await Promise.all(Array.from({ length: M }, (_, i) => store.put(`tick/${i}`, value)))
const tick = M / (Number(process.hrtime.bigint() - t) / 1e9)
const groups = store.stats().commitGroups - g0
console.log(
  `durable 16 KiB puts/s: one at a time ${seq.toFixed(0)}, ${M} issued in one tick ${tick.toFixed(0)} ` +
    `(${(tick / seq).toFixed(1)} x, ${groups} commit groups)`,
)

await store.put('mib', randomBytes(1 << 20))
for (let i = 0; i < 20; i++) store.getSync('mib')
const syncs = []
for (let i = 0; i < 200; i++) {
  const t = process.hrtime.bigint()
  store.getSync('mib')
  syncs.push(Number(process.hrtime.bigint() - t) / 1000)
}
console.log(`getSync 1 MiB, median of 200: ${median(syncs).toFixed(1)} us`)

// Alternating which goes first, so drift in the machine's load hits both.
const sync16 = []
const async16 = []
for (let r = 0; r < 2000; r++) {
  const k = `obj/${order[r % N]}`
  const once = async (out, f) => {
    const t = process.hrtime.bigint()
    await f()
    out.push(Number(process.hrtime.bigint() - t) / 1000)
  }
  if (r & 1) {
    await once(async16, () => store.get(k))
    await once(sync16, () => store.getSync(k))
  } else {
    await once(sync16, () => store.getSync(k))
    await once(async16, () => store.get(k))
  }
}
const DEPTH = 64
t = process.hrtime.bigint()
let done = 0
for (let r = 0; r < 40; r++) {
  await Promise.all(Array.from({ length: DEPTH }, (_, j) => store.get(`obj/${order[(r * DEPTH + j) % N]}`)))
  done += DEPTH
}
const inflight = done / (Number(process.hrtime.bigint() - t) / 1e9)
console.log(
  `16 KiB get, median of 2000: getSync ${median(sync16).toFixed(1)} us, await get ${median(async16).toFixed(1)} us ` +
    `(${(median(async16) / median(sync16)).toFixed(2)} x getSync); ${DEPTH} in flight: ${inflight.toFixed(0)} gets/s`,
)

// Awaited get against getSync of 1 MiB objects, both from the device (a
// store of its own without a read cache), interleaved.
{
  const cold = await Store.open(join(dir, 'mib.blobcask'), { capacity: 64 * 1024 * 1024, cacheBytes: 0 })
  const MIBS = 16
  for (let i = 0; i < MIBS; i++) await cold.put(`m/${i}`, randomBytes(1 << 20))
  const syncs = []
  const asyncs = []
  for (let r = 0; r < 400; r++) {
    const k = `m/${r % MIBS}`
    const once = async (out, f) => {
      const t = process.hrtime.bigint()
      await f()
      out.push(Number(process.hrtime.bigint() - t) / 1000)
    }
    if (r & 1) {
      await once(asyncs, () => cold.get(k))
      await once(syncs, () => cold.getSync(k))
    } else {
      await once(syncs, () => cold.getSync(k))
      await once(asyncs, () => cold.get(k))
    }
  }
  await cold.close()
  console.log(
    `1 MiB get from the device, median of 400: getSync ${median(syncs).toFixed(1)} us, await get ${median(asyncs).toFixed(1)} us ` +
      `(${(median(asyncs) / median(syncs)).toFixed(2)} x getSync)`,
  )
}

// Warm: a hot set read twice first (the read cache keeps an object from its
// second whole read on), then every getSync is a hit.
let lmdb = null
try {
  lmdb = createRequire(join(process.env.LMDB_JS_DIR ?? '.', 'package.json'))('lmdb')
} catch {}
// Warm getSync of 16 KiB and 1 MiB values against lmdb-js getBinary of
// the same values, interleaved sample by sample.
async function warmVersusLmdb(size, samples) {
  const v = randomBytes(size)
  const hot = Array.from({ length: Math.min(256, (16 << 20) / size) }, (_, i) => `warm${size}/${i}`)
  for (const k of hot) store.putSync(k, v)
  const env = lmdb.open({ path: join(dir, `warm-${size}.lmdb`), encoding: 'binary' })
  for (const k of hot) env.putSync(k, v)
  for (let r = 0; r < 2; r++) for (const k of hot) store.getSync(k)
  const hits0 = store.stats().cache.hits
  const ours = []
  const theirs = []
  for (let r = 0; r < samples; r++) {
    const k = hot[(r * 7919) % hot.length]
    let t = process.hrtime.bigint()
    const a = store.getSync(k)
    ours.push(Number(process.hrtime.bigint() - t) / 1000)
    t = process.hrtime.bigint()
    const b = env.getBinary(k)
    theirs.push(Number(process.hrtime.bigint() - t) / 1000)
    if (a.length !== size || b.length !== size) throw new Error('short warm read')
  }
  const served = store.stats().cache.hits - hits0
  await env.close()
  const label = size < 1 << 20 ? `${size >> 10} KiB` : `${size >> 20} MiB`
  console.log(
    `warm ${label}, median of ${samples}: getSync (cache hit) ${median(ours).toFixed(2)} us, lmdb-js getBinary ` +
      `${median(theirs).toFixed(2)} us (${(median(ours) / median(theirs)).toFixed(2)} x); ${served} of ${samples} were cache hits`,
  )
}
// 500 durable 16 KiB puts issued in one tick, against lmdb-js doing the
// same (its puts in one tick commit as one synced transaction), rounds in
// turn, each round overwriting the last one's keys.
async function tickVersusLmdb(rounds) {
  const env = lmdb.open({ path: join(dir, 'tick.lmdb'), encoding: 'binary' })
  const ours = []
  const theirs = []
  const timed = async (out, f) => {
    const t = process.hrtime.bigint()
    await f()
    out.push(Number(process.hrtime.bigint() - t) / 1e6)
  }
  for (let r = 0; r < rounds; r++) {
    const batch = (put) => Promise.all(Array.from({ length: M }, (_, i) => put(`tick/${i}`, value)))
    const mine = () => timed(ours, () => batch((k, v) => store.put(k, v)))
    const lmdbs = () => timed(theirs, () => batch((k, v) => env.put(k, v)))
    if (r & 1) { await lmdbs(); await mine() } else { await mine(); await lmdbs() }
  }
  await env.close()
  console.log(
    `${M} durable 16 KiB puts issued in one tick, median of ${rounds} rounds in turn: ${median(ours).toFixed(1)} ms, ` +
      `lmdb-js ${median(theirs).toFixed(1)} ms (${(median(ours) / median(theirs)).toFixed(2)} x)`,
  )
}

if (lmdb) {
  await warmVersusLmdb(SIZE, 3000)
  await warmVersusLmdb(1 << 20, 500)
  await tickVersusLmdb(15)
} else {
  console.log('warm gets vs lmdb-js: skipped (set LMDB_JS_DIR to a directory where `npm install lmdb` ran)')
}

const BIG = 48 * 1024 * 1024
const big = randomBytes(BIG)
await store.put('big', big)
async function loopDelay(fn) {
  const h = monitorEventLoopDelay({ resolution: 1 })
  h.enable()
  await fn()
  h.disable()
  return `max ${(h.max / 1e6).toFixed(1)} ms, p99 ${(h.percentile(99) / 1e6).toFixed(1)} ms`
}
const ROUNDS = 5
const idle = await loopDelay(() => sleep(500))
const gets48 = await loopDelay(async () => {
  for (let r = 0; r < ROUNDS; r++) {
    const b = await store.get('big')
    if (b.length !== BIG) throw new Error('short read')
    await sleep(5)
  }
})
const puts48 = await loopDelay(async () => {
  for (let r = 0; r < ROUNDS; r++) {
    await store.put('big', big)
    await sleep(5)
  }
})
// The floor: the same monitor while a `dd iflag=direct` process reads as
// many bytes of the same file, ROUNDS times (no blobcask call in this
// process). One shell, started before the window, runs them all: spawning
// from this process inside the window would delay the loop itself.
const ddRounds = Array.from({ length: ROUNDS }, () =>
  `dd if=${join(dir, 'store.blobcask')} of=/dev/null bs=${BIG} count=1 iflag=direct 2>/dev/null`).join('; ')
const sh = spawn('sh', ['-c', `read go; ${ddRounds}`], { stdio: ['pipe', 'ignore', 'ignore'] })
await sleep(100)
const dd48 = await loopDelay(async () => {
  const done = new Promise((resolve) => sh.on('exit', resolve))
  sh.stdin.write('go\n')
  await done
})
console.log(`event-loop delay (monitorEventLoopDelay, 1 ms resolution), ${ROUNDS} rounds each: ` +
  `await get 48 MiB ${gets48}; await put 48 MiB ${puts48}; idle 500 ms ${idle}; ` +
  `a dd iflag=direct process reading 48 MiB of the file ${dd48}`)
await store.close()
rmSync(dir, { recursive: true, force: true })
