// Read results as Buffers (copies up to 1 MiB, the engine's own read
// buffer above), and values captured by put()/writePart() before they
// return (node --test).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { setImmediate as tick } from 'node:timers/promises'

import { Store } from '../lib.mjs'

import { tempPath, withStore } from './helpers.mjs'

// Sizes on both sides of the inline threshold (1024) and of the size up to
// which results are copied (1 MiB, the read cache's largest object).
const SIZES = [0, 100, 1024, 4096, 16 * 1024, 16 * 1024 + 1, 100_000, 1 << 20, (1 << 20) + 1, 3 << 20]

test('every read method returns the stored bytes, at every size', async () => {
  await withStore({ capacity: 64 << 20 }, async (s) => {
    for (const size of SIZES) {
      const v = randomBytes(size)
      await s.put(`k${size}`, v)
      for (const got of [await s.get(`k${size}`), s.getSync(`k${size}`)]) {
        assert.ok(Buffer.isBuffer(got))
        assert.equal(got.length, size)
        assert.ok(got.equals(v), `get of ${size} bytes`)
      }
      const at = size >> 1
      for (const got of [await s.read(`k${size}`, at, 1000), s.readSync(`k${size}`, at, 1000)]) {
        assert.ok(got.equals(v.subarray(at, at + 1000)), `read of ${size} bytes at ${at}`)
      }
    }
  })
})

// Invariant 9 (core/INVARIANTS.md).
test('writing into a returned Buffer never changes what later reads return', async () => {
  // The read cache (on by default) keeps whole objects; a Buffer handed to
  // JavaScript must never be its memory, nor the index's (inline values).
  await withStore({ capacity: 64 << 20 }, async (s) => {
    for (const size of [100, 16 * 1024 + 1, 100_000, 1 << 20, (1 << 20) + 1]) {
      const v = randomBytes(size)
      await s.put(`w${size}`, v)
      const before = s.stats().cache
      const reads = [
        () => s.getSync(`w${size}`),
        () => s.get(`w${size}`),
        () => s.read(`w${size}`, 0, size),
        () => s.readSync(`w${size}`, 1, size),
      ]
      for (const read of reads) {
        for (let round = 0; round < 2; round++) {
          const got = await read()
          const want = read === reads[3] ? v.subarray(1) : v
          assert.ok(got.equals(want), `${size} bytes: a read returned changed bytes`)
          got.fill(0xee)
        }
      }
      assert.ok(s.getSync(`w${size}`).equals(v))
      if (size > 512 && size <= 1 << 20) {
        const after = s.stats().cache
        assert.ok(after.hits > before.hits, `${size} bytes: no cache hit (${JSON.stringify(after)})`)
        assert.equal(after.capacity, 64 << 20)
      }
    }
  })
  await withStore({ capacity: 64 << 20, cacheBytes: 0 }, async (s) => {
    await s.put('k', randomBytes(20_000))
    s.getSync('k')
    s.getSync('k')
    assert.deepEqual(s.stats().cache, { hits: 0, misses: 0, bytes: 0, capacity: 0, warmedBlocks: 0, warming: false })
  })
  for (const cacheBytes of [-1, 1.5, 2 ** 64, 2 ** 70, Infinity, NaN]) {
    await assert.rejects(withStore({ cacheBytes }, async () => {}), { code: 'INVALID_ARGUMENT' }, `${cacheBytes}`)
  }
})

test('a returned Buffer survives overwrite, delete, close and GC', async () => {
  const t = tempPath()
  const s = await Store.open(t.path, { capacity: 64 << 20 })
  const big = randomBytes(3 << 20)
  const small = randomBytes(200)
  await s.put('big', big)
  await s.put('small', small)
  const held = [await s.get('big'), s.getSync('big'), await s.read('big', 4096, 1 << 20), await s.get('small')]
  const want = [big, big, big.subarray(4096, 4096 + (1 << 20)), small]
  const check = (when) => held.forEach((h, i) => assert.ok(h.equals(want[i]), `${when}: buffer ${i}`))
  await s.put('big', randomBytes(3 << 20))
  await s.put('small', randomBytes(200))
  check('after overwrite')
  await s.delete('big')
  await s.delete('small')
  // Reuse the freed space.
  await Promise.all(Array.from({ length: 16 }, (_, i) => s.put(`fill/${i}`, randomBytes(1 << 20))))
  check('after delete and reuse')
  await s.close()
  check('after close')
  if (global.gc) {
    // Buffers dropped meanwhile are finalized; the held ones stay intact.
    for (let i = 0; i < 5; i++) {
      global.gc()
      await tick()
    }
  }
  check('after GC')
  t.cleanup()
})

test('writing into a returned Buffer changes neither the store nor another read', async () => {
  await withStore({ capacity: 64 << 20 }, async (s) => {
    for (const size of [100, 100_000]) {
      const v = randomBytes(size)
      await s.put('k', v)
      const a = await s.get('k')
      const b = s.getSync('k')
      a.fill(0)
      assert.ok(b.equals(v))
      assert.ok((await s.get('k')).equals(v))
      assert.ok(s.getSync('k').equals(v))
    }
  })
})

test('many reads of one object, held at once, are independent Buffers', async () => {
  await withStore({ capacity: 64 << 20 }, async (s) => {
    const v = randomBytes(256 * 1024)
    await s.put('k', v)
    const all = await Promise.all(Array.from({ length: 32 }, () => s.get('k')))
    for (let i = 0; i < 32; i++) all.push(s.getSync('k'))
    for (const b of all) assert.ok(b.equals(v))
    all[0][0] ^= 1
    assert.ok(all[1].equals(v))
  })
})

test('put() below 1 MiB copies the value before it returns: changing the Buffer afterwards changes nothing', async () => {
  await withStore({ capacity: 256 << 20 }, async (s) => {
    const size = (1 << 20) - 1
    const buf = Buffer.alloc(size, 0xab)
    const original = Buffer.from(buf)
    const p = s.put('k', buf)
    buf.fill(0xcd) // right after put() returned, before awaiting
    await p
    assert.ok((await s.get('k')).equals(original))
    // The same for a multipart part.
    const part = Buffer.alloc(1 << 20, 0x11)
    const up = await s.beginUpload('u', 1 << 20)
    const w = up.writePart(0, part)
    part.fill(0x22)
    await w
    await up.commit()
    assert.ok((await s.get('u')).equals(Buffer.alloc(1 << 20, 0x11)))
  })
})

test('put() of 1 MiB or more writes from the caller\'s own bytes, a view at any offset included', async () => {
  await withStore({ capacity: 256 << 20 }, async (s) => {
    const backing = Buffer.alloc((3 << 20) + 4096)
    for (let i = 0; i < backing.length; i++) backing[i] = (i * 7 + 3) & 0xff
    // A view starting 13 bytes into a larger buffer, 3 MiB + 5 long.
    const view = backing.subarray(13, 13 + (3 << 20) + 5)
    await s.put('view', view)
    assert.ok((await s.get('view')).equals(view))
    const exact = new Uint8Array(backing.buffer, backing.byteOffset + 4096, 1 << 20)
    await s.put('exact', exact)
    assert.ok((await s.get('exact')).equals(Buffer.from(exact)))
  })
})

test('changing a Buffer of 1 MiB or more before its put settles stores old or new bytes, never a corrupt object', async () => {
  // The README asks callers to leave it alone until the promise settles
  // (as fs.write does); one that does not gets a mix, read back whole.
  await withStore({ capacity: 256 << 20 }, async (s) => {
    const size = 32 << 20
    const buf = Buffer.alloc(size, 0xab)
    const p = s.put('k', buf)
    buf.fill(0xcd)
    await p
    const back = await s.get('k')
    assert.equal(back.length, size)
    for (let i = 0; i < size; i += 4093) assert.ok(back[i] === 0xab || back[i] === 0xcd, `byte ${i}`)
    assert.ok(back.every((b) => b === 0xab || b === 0xcd))
  })
})

test('a synchronous loop of 1 MiB getSync does not hold every result until the loop ends', async () => {
  await withStore({ capacity: 16 << 20 }, async (s) => {
    await s.put('mib', randomBytes(1 << 20))
    for (let i = 0; i < 20; i++) s.getSync('mib')
    const before = process.memoryUsage().rss
    // No await: the event loop does not turn, so only memory V8 frees by
    // itself (not an external Buffer's finalizer) can be reused.
    for (let i = 0; i < 400; i++) s.getSync('mib')
    const grown = (process.memoryUsage().rss - before) / (1 << 20)
    assert.ok(grown < 200, `RSS grew by ${grown.toFixed(0)} MiB over 400 reads of 1 MiB`)
  })
})

test('small objects are cache hits from their first get after a reopen', async () => {
  const t = tempPath()
  const values = new Map()
  for (let i = 0; i < 2000; i++) values.set(`k/${String(i).padStart(5, '0')}`, randomBytes(100))
  let s = await Store.open(t.path, { capacity: 64 << 20 })
  await s.bulkLoad(values.entries())
  await s.close()
  s = await Store.open(t.path)
  const deadline = Date.now() + 60_000
  while (s.stats().cache.warming) {
    assert.ok(Date.now() < deadline, JSON.stringify(s.stats().cache))
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  const warm = s.stats().cache
  assert.ok(warm.warmedBlocks > 0, JSON.stringify(warm))
  for (const [k, v] of values) assert.ok((await s.get(k)).equals(v), k)
  const after = s.stats().cache
  assert.deepEqual([after.hits - warm.hits, after.misses - warm.misses], [2000, 0])
  await s.close()
  s = await Store.open(t.path, { warmUp: false })
  assert.deepEqual([s.stats().cache.warmedBlocks, s.stats().cache.warming], [0, false])
  await s.close()
  for (const opts of [{ cacheFraction: 0 }, { cacheFraction: 1.5 }, { cacheFraction: NaN }, { cacheFraction: 0.5, cacheBytes: 1 << 20 }, { cacheFraction: '0.5' }, { warmUp: 1 }]) {
    await assert.rejects(Store.open(t.path, opts), { code: 'INVALID_ARGUMENT' }, JSON.stringify(opts))
  }
  s = await Store.open(t.path, { cacheFraction: 0.01 })
  assert.ok(s.stats().cache.capacity > 0)
  await s.close()
})
