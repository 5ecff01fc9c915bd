// Node binding costs, in one run:
//  * awaited get of cold data vs readFileSync of the same bytes from a file
//    per object (page cache dropped first when permitted: run as root);
//  * puts issued in one tick vs one at a time (group commit).
//
//   (cd bindings-node && npm install --no-audit --no-fund)
//   node benches/node_bench.mjs [DIR]
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { execSync } from 'node:child_process'
import { Store } from '../bindings-node/lib.mjs'

const dir = process.argv[2] ?? 'target/bench/node'
rmSync(dir, { recursive: true, force: true })
mkdirSync(join(dir, 'files'), { recursive: true })
const N = 2000
const SIZE = 16 * 1024
const store = await Store.open(join(dir, 'store.blobcask'), { capacity: 256 * 1024 * 1024 })
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
await store.close()
rmSync(dir, { recursive: true, force: true })
