// The durability option: 'sync' (default) or { maxDelayMs } (node --test).
import { test } from 'node:test'
import assert from 'node:assert/strict'

import { Store } from '../lib.mjs'

import { tempPath, withStore } from './helpers.mjs'

test("durability 'sync': every awaited put is its own commit group", async () => {
  for (const options of [{}, { durability: 'sync' }]) {
    await withStore(options, async (s) => {
      const before = s.stats().commitGroups
      for (let i = 0; i < 5; i++) await s.put(`k${i}`, Buffer.alloc(1000, i))
      assert.equal(s.stats().commitGroups - before, 5, JSON.stringify(options))
    })
  }
})

test('durability { maxDelayMs }: puts resolve before their group is written, sync() and close() write it', async () => {
  const t = tempPath()
  try {
    const s = await Store.open(t.path, { capacity: 16 << 20, durability: { maxDelayMs: 60_000 } })
    const before = s.stats().commitGroups
    for (let i = 0; i < 20; i++) await s.put(`k${i}`, Buffer.alloc(1000, i))
    await s.delete('k0')
    // Acknowledged at once, visible at once, written later: one group at most.
    assert.ok(s.stats().commitGroups - before <= 1, `${s.stats().commitGroups - before} groups`)
    assert.deepEqual(await s.get('k7'), Buffer.alloc(1000, 7))
    await s.sync()
    assert.ok(s.stats().commitGroups > before, 'sync() wrote no group')
    await s.put('late', Buffer.from('x'))
    await s.close()
    const again = await Store.open(t.path)
    assert.deepEqual(await again.get('k19'), Buffer.alloc(1000, 19))
    assert.deepEqual(await again.get('late'), Buffer.from('x'))
    assert.equal(again.has('k0'), false)
    await again.close()
  } finally {
    t.cleanup()
  }
})

test('durability { maxDelayMs }: the group is written within the delay', async () => {
  await withStore({ durability: { maxDelayMs: 20 } }, async (s) => {
    const before = s.stats().commitGroups
    await s.put('k', Buffer.from('v'))
    const deadline = Date.now() + 10_000
    while (s.stats().commitGroups === before && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    assert.ok(s.stats().commitGroups > before, 'the group was never written')
  })
})

test('a bad durability is INVALID_ARGUMENT and creates nothing', async () => {
  const bad = [
    'buffered',
    'SYNC',
    '',
    5,
    true,
    {},
    { maxDelay: 5 },
    { maxDelayMs: 0 },
    { maxDelayMs: -1 },
    { maxDelayMs: 0.0001 },
    { maxDelayMs: NaN },
    { maxDelayMs: Infinity },
    { maxDelayMs: 1e300 },
    { maxDelayMs: '5' },
    { maxDelayMs: 5n },
  ]
  const t = tempPath()
  try {
    for (const durability of bad) {
      const what = JSON.stringify(durability, (_, v) => (typeof v === 'bigint' ? `${v}n` : v))
      await assert.rejects(Store.open(t.path, { durability }), { code: 'INVALID_ARGUMENT' }, what)
      assert.throws(() => Store.openSync(t.path, { durability }), { code: 'INVALID_ARGUMENT' }, what)
    }
    await assert.rejects(Store.open(t.path, { create: false }), { code: 'NOT_FOUND' }, 'a store was created')
  } finally {
    t.cleanup()
  }
})
