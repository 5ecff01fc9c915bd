// A cache store: eviction: 's3fifo' (issue 43) (node --test).
import { test } from 'node:test'
import assert from 'node:assert/strict'

import { Store } from '../lib.mjs'

import { tempPath } from './helpers.mjs'

test("eviction 's3fifo': puts beyond the store's size evict, the store keeps its size", async () => {
  const t = tempPath()
  try {
    const s = await Store.open(t.path, { capacity: 2 << 20, eviction: 's3fifo' })
    for (let i = 0; i < 200; i++) await s.put(`k${i}`, Buffer.alloc(50_000, i))
    const st = s.stats()
    assert.equal(st.capacity, 2 << 20)
    assert.ok(st.evictions > 0 && st.evictedBytes >= 50_000 * st.evictions, JSON.stringify(st))
    assert.equal(st.objects + st.evictions, 200)
    assert.deepEqual(await s.get('k199'), Buffer.alloc(50_000, 199))
    assert.equal(await s.get('nope'), undefined)
    assert.equal(s.stats().misses, 1)
    assert.equal(s.stats().hits, 1)
    await s.close()
  } finally {
    t.cleanup()
  }
})

test('an unknown eviction is INVALID_ARGUMENT', async () => {
  const t = tempPath()
  try {
    await assert.rejects(Store.open(t.path, { eviction: 'lru' }), (e) => e.code === 'INVALID_ARGUMENT')
  } finally {
    t.cleanup()
  }
})
