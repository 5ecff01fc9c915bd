// Reports carry every figure of the engine; `salvage` skips a damaged
// tuple block at a read-only open and names it in `stats().recovery`.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync, writeFileSync } from 'node:fs'

import { Store } from '../lib.mjs'

import { tempPath, withStore } from './helpers.mjs'

const valueOf = (i) => Buffer.alloc(100, i % 251)

test('stats carry every figure the engine reports, JSON-safe', async () => {
  await withStore({}, async (s) => {
    await s.put('k', Buffer.alloc(5000, 1))
    const st = s.stats()
    assert.ok(st.largestFreePiece > 0 && st.largestFreePiece <= st.freeBytes)
    assert.equal(st.maxCapacity, null)
    assert.ok(st.spaceAmplification > 1)
    assert.ok(st.writeAmplification >= 1)
    assert.deepEqual(st.recovery.skipped, [])
    assert.equal(typeof st.cache.capacity, 'number')
    assert.deepEqual(JSON.parse(JSON.stringify(st)), st)
    const info = s.statSync('k')
    assert.deepEqual(Object.keys(info).sort(), ['created', 'expires', 'inline', 'size', 'version'])
    assert.equal(info.expires, null)
  })
})

test('a salvage open serves only exact objects and names the skipped block', async () => {
  const t = tempPath()
  try {
    const s = await Store.open(t.path, { capacity: 16 << 20 })
    for (let i = 0; i < 3000; i++) s.putSync(`k${String(i).padStart(5, '0')}`, valueOf(i))
    await s.close()
    // One flipped byte beside a key, in every block that holds it.
    const image = readFileSync(t.path)
    const key = Buffer.from('k01500')
    let at = image.indexOf(key)
    assert.ok(at >= 0)
    while (at >= 0) {
      image[at + key.length + 2] ^= 0x40
      at = image.indexOf(key, at + 1)
    }
    writeFileSync(t.path, image)

    // The clean close wrote an index image, which holds no keys (the hash
    // index records fingerprints): it is whole, so the open loads it and
    // reads no tuple block; the damaged block is found by the read of an
    // object it holds.
    const w = await Store.open(t.path)
    await assert.rejects(w.get('k01500'), { code: 'CORRUPT' })
    await w.close()
    await assert.rejects(Store.open(t.path, { salvage: true }), (e) => {
      // The engine's words, with the option named as JavaScript names it.
      assert.equal(e.code, 'INVALID_ARGUMENT')
      assert.match(e.message, /salvage needs readOnly/)
      return true
    })
    await assert.rejects(Store.open(t.path, { ioEngine: 'uring' }), /unknown ioEngine "uring"/)
    const r = await Store.open(t.path, { readOnly: true, salvage: true })
    const skipped = r.stats().recovery.skipped
    assert.equal(skipped.length, 1)
    assert.match(skipped[0], /tuple block/)
    assert.equal(r.has('k01500'), false)
    let served = 0
    for (let i = 0; i < 3000; i++) {
      const k = `k${String(i).padStart(5, '0')}`
      if (!r.has(k)) continue
      served++
      assert.deepEqual(r.getSync(k), valueOf(i))
    }
    assert.ok(served > 0 && served < 3000, `served ${served}`)
    await r.close()
    assert.deepEqual(readFileSync(t.path), image, 'nothing written to the damaged store')
  } finally {
    t.cleanup()
  }
})
