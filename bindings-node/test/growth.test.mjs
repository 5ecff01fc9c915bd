// Capacity and growth: a store starts small and grows as it fills, up to
// maxCapacity; grow()/growSync() grow it at once; the index kind, inline
// threshold and maxCapacity are stored in the store and used at reopen.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, statSync } from 'node:fs'

import { Store } from '../lib.mjs'

import { tempPath } from './helpers.mjs'

const MiB = 1024 * 1024

/** Deterministic bytes that differ per seed. */
function pattern(seed, n) {
  const b = Buffer.alloc(n)
  for (let i = 0; i < n; i++) b[i] = (seed * 31 + i * 7 + (i >> 9)) & 0xff
  return b
}

/** Puts 1 MiB values under `prefix` until NO_SPACE (required within `limit`); the keys stored. */
async function fillUntilNoSpace(s, prefix, limit = 200) {
  const stored = []
  for (let i = 0; i < limit; i++) {
    try {
      await s.put(`${prefix}/${i}`, pattern(i, MiB))
    } catch (e) {
      assert.equal(e.code, 'NO_SPACE', e.message)
      return stored
    }
    stored.push(`${prefix}/${i}`)
  }
  assert.fail(`no NO_SPACE after ${limit} MiB`)
}

test('a new store starts at 16 MiB and grows as it fills', async () => {
  const t = tempPath()
  try {
    const s = await Store.open(t.path)
    assert.equal(s.stats().capacity, 16 * MiB)
    assert.equal(statSync(t.path).size, 16 * MiB)
    for (let i = 0; i < 40; i++) await s.put(`big/${i}`, pattern(i, MiB))
    const capacity = s.stats().capacity
    assert.ok(capacity >= 40 * MiB, `capacity ${capacity}`)
    assert.ok(statSync(t.path).size >= capacity)
    for (let i = 0; i < 40; i++) assert.deepEqual(await s.get(`big/${i}`), pattern(i, MiB))
    await s.close()
    const again = Store.openSync(t.path)
    assert.equal(again.stats().capacity, capacity)
    assert.equal(again.stats().objects, 40)
    assert.deepEqual(again.getSync('big/39'), pattern(39, MiB))
    again.closeSync()
  } finally {
    t.cleanup()
  }
})

test('maxCapacity limits growth and is stored', async () => {
  const t = tempPath()
  try {
    let s = await Store.open(t.path, { maxCapacity: 32 * MiB })
    const stored = await fillUntilNoSpace(s, 'a')
    assert.ok(stored.length > 16 && stored.length < 32, `${stored.length} MiB stored`)
    assert.ok(s.stats().capacity <= 32 * MiB)
    assert.deepEqual(await s.get(stored.at(-1)), pattern(stored.length - 1, MiB))
    await s.close()
    assert.ok(statSync(t.path).size <= 32 * MiB)
    // Reopened without options: the stored limit holds.
    s = await Store.open(t.path)
    await assert.rejects(s.put('one-more', pattern(0, 4 * MiB)), { code: 'NO_SPACE' })
    await assert.rejects(s.grow(64 * MiB), (e) => e.code === 'INVALID_ARGUMENT' && /maxCapacity/.test(e.message))
    assert.equal(s.stats().objects, stored.length)
    await s.close()
    // A new limit at a read-write open replaces the stored one.
    s = await Store.open(t.path, { maxCapacity: 64 * MiB })
    await s.put('one-more', pattern(0, 4 * MiB))
    const more = await fillUntilNoSpace(s, 'b')
    assert.ok(more.length > 0)
    assert.ok(s.stats().capacity > 32 * MiB && s.stats().capacity <= 64 * MiB)
    await s.close()
    s = Store.openSync(t.path)
    assert.throws(() => s.growSync(128 * MiB), { code: 'INVALID_ARGUMENT' })
    s.closeSync()
    // Infinity lifts the limit, for good.
    s = Store.openSync(t.path, { maxCapacity: Infinity })
    s.closeSync()
    s = Store.openSync(t.path)
    s.growSync(100 * MiB)
    assert.equal(s.stats().capacity, 100 * MiB)
    s.closeSync()
  } finally {
    t.cleanup()
  }
})

test('maxCapacity of the wrong type or value is refused and nothing is created', async () => {
  const t = tempPath()
  try {
    for (const maxCapacity of ['32M', true, {}, [1], 32n * 1024n * 1024n]) {
      await assert.rejects(Store.open(t.path, { maxCapacity }), { code: 'INVALID_ARGUMENT' }, String(maxCapacity))
      assert.throws(() => Store.openSync(t.path, { maxCapacity }), { code: 'INVALID_ARGUMENT' }, String(maxCapacity))
    }
    for (const maxCapacity of [-1, 1.5, NaN, -Infinity, 4096]) {
      await assert.rejects(Store.open(t.path, { maxCapacity }), { code: 'INVALID_ARGUMENT' }, String(maxCapacity))
    }
    await assert.rejects(Store.open(t.path, { capacity: 64 * MiB, maxCapacity: 32 * MiB }), { code: 'INVALID_ARGUMENT' })
    assert.equal(existsSync(t.path), false)
  } finally {
    t.cleanup()
  }
})

test('grow and growSync: larger works, smaller is refused', async () => {
  const t = tempPath()
  try {
    const s = await Store.open(t.path)
    await s.put('k', Buffer.alloc(10_000, 'v'))
    await s.grow(48 * MiB)
    assert.equal(s.stats().capacity, 48 * MiB)
    assert.equal(statSync(t.path).size, 48 * MiB)
    s.growSync(64 * MiB)
    assert.equal(s.stats().capacity, 64 * MiB)
    await s.grow(64 * MiB) // its own size: nothing to do
    s.growSync(64 * MiB + 4095) // rounded down to 4 KiB: the same
    assert.equal(s.stats().capacity, 64 * MiB)
    await assert.rejects(s.grow(32 * MiB), (e) => e.code === 'INVALID_ARGUMENT' && /never shrinks/.test(e.message))
    assert.throws(() => s.growSync(32 * MiB), { code: 'INVALID_ARGUMENT' })
    for (const bad of ['128M', -1, 1.5, NaN, true, 10n]) {
      await assert.rejects(async () => s.grow(bad), { code: 'INVALID_ARGUMENT' }, String(bad))
      assert.throws(() => s.growSync(bad), { code: 'INVALID_ARGUMENT' }, String(bad))
    }
    assert.equal(s.stats().capacity, 64 * MiB)
    // The grown space is used without further growth.
    for (let i = 0; i < 40; i++) await s.put(`x/${i}`, pattern(i, MiB))
    assert.equal(s.stats().capacity, 64 * MiB)
    assert.deepEqual(await s.get('k'), Buffer.alloc(10_000, 'v'))
    await s.close()
    await assert.rejects(s.grow(128 * MiB), { code: 'CLOSED' })
    assert.throws(() => s.growSync(128 * MiB), { code: 'CLOSED' })
    // A read-only store never grows.
    const r = await Store.open(t.path, { readOnly: true })
    await assert.rejects(r.grow(128 * MiB), { code: 'UNSUPPORTED' })
    assert.throws(() => r.growSync(128 * MiB), { code: 'UNSUPPORTED' })
    await r.close()
    assert.equal(statSync(t.path).size, 64 * MiB)
    // A larger capacity at reopen grows; a smaller one is refused.
    const g = await Store.open(t.path, { capacity: 80 * MiB })
    assert.equal(g.stats().capacity, 80 * MiB)
    await g.close()
    await assert.rejects(Store.open(t.path, { capacity: 32 * MiB }), { code: 'INVALID_ARGUMENT' })
  } finally {
    t.cleanup()
  }
})

test('the index kind and inline threshold chosen at creation are used at reopen', async () => {
  const t = tempPath()
  try {
    let s = await Store.open(t.path, { index: 'btree', inlineThreshold: 0 })
    for (let i = 0; i < 20; i++) await s.put(`k/${String(i).padStart(2, '0')}`, Buffer.from('x'))
    assert.equal((await s.stat('k/00')).inline, false)
    await s.close()
    // No options: the stored kind (listing works) and threshold.
    s = await Store.open(t.path)
    assert.equal(s.stats().index, 'btree')
    const keys = []
    for await (const k of s.list('k/1')) keys.push(k.toString())
    assert.deepEqual(keys, Array.from({ length: 10 }, (_, i) => `k/1${i}`))
    assert.equal((await s.put('small', Buffer.from('tiny'))).inline, false)
    await s.close()
    // A read-only open's explicit kind is for itself only...
    s = await Store.open(t.path, { index: 'hash', readOnly: true })
    assert.equal(s.stats().index, 'hash')
    await s.close()
    s = await Store.open(t.path, { readOnly: true })
    assert.equal(s.stats().index, 'btree')
    await s.close()
    // ...a read-write open's replaces the stored one.
    s = await Store.open(t.path, { index: 'fst' })
    await s.close()
    s = await Store.open(t.path)
    assert.equal(s.stats().index, 'fst')
    let n = 0
    for await (const _ of s.list('k/')) n++
    assert.equal(n, 20)
    await s.close()
    // A store made without an index is on the hash index, and stays there.
    const plain = t.path + '.plain'
    ;(await Store.open(plain)).closeSync()
    s = await Store.open(plain)
    assert.equal(s.stats().index, 'hash')
    await s.close()
  } finally {
    t.cleanup()
  }
})
