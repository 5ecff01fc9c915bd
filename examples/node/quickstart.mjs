// blobcask from Node: store, read a range, list, upload in parts, errors.
//   (cd bindings-node && npm install --no-audit --no-fund)
//   node examples/node/quickstart.mjs
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { Store } from '../../bindings-node/lib.mjs'

const dir = mkdtempSync(join(tmpdir(), 'blobcask-demo-'))
const store = await Store.open(join(dir, 'demo.blobcask'), { capacity: 64 * 1024 * 1024 }) // default index: hash

await store.put('thumbs/cat.jpg', randomBytes(20_000)) // resolves once durable
const head = await store.read('thumbs/cat.jpg', 0, 4096) // any byte range
console.log('first 4 KiB:', head.length, 'bytes;', await store.stat('thumbs/cat.jpg'))

// Many puts issued in one tick share one commit.
await Promise.all(Array.from({ length: 100 }, (_, i) => store.put(`thumbs/${i}.jpg`, randomBytes(2000))))

const up = await store.beginUpload('videos/clip.mp4', 3 * 4096 + 10)
await Promise.all([up.writePart(8192, Buffer.alloc(4106, 'c')), up.writePart(0, Buffer.alloc(8192, 'a'))])
await up.commit()

let n = 0
for await (const key of store.list('thumbs/')) n++ // byte order, any index
console.log('keys under thumbs/:', n)
console.log('missing ->', await store.get('missing')) // undefined: no object
try {
  await store.stat('missing')
} catch (e) {
  console.log('stat of missing ->', e.code) // NOT_FOUND
}
console.log(store.stats())
await store.close()
rmSync(dir, { recursive: true, force: true })
