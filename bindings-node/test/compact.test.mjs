// Store.compact / compactSync: objects slide down the store so that free
// space left in small holes joins up again.
import { test } from 'node:test'
import assert from 'node:assert/strict'

import { Store } from '../lib.mjs'

import { tempPath, withStore } from './helpers.mjs'

const MiB = 1024 * 1024
const SIZE = 8 * MiB // fixed: capacity == maxCapacity, so the store cannot grow
const VALUE = 4096

function pattern(seed, n) {
  const b = Buffer.alloc(n)
  for (let i = 0; i < n; i++) b[i] = (seed * 31 + i * 7 + (i >> 9)) & 0xff
  return b
}

/** Fills `s` with 4 KiB values until it is full, then deletes every other
 * one (some of those kept have a long ttl); returns what it holds. */
async function fragment(s) {
  const all = new Map()
  for (let i = 0; ; i++) {
    const key = `obj/${String(i).padStart(5, '0')}`
    const value = pattern(i, VALUE)
    try {
      await s.put(key, value, i % 4 === 1 ? { ttl: 3_600_000 } : undefined)
    } catch (e) {
      assert.equal(e.code, 'NO_SPACE', e.message)
      break
    }
    all.set(key, value)
    assert.ok(i < SIZE / VALUE, 'the store never filled up')
  }
  const kept = new Map()
  let i = 0
  for (const [k, v] of all) {
    if (i++ % 2 === 0) await s.delete(k)
    else kept.set(k, v)
  }
  assert.ok(kept.size > 500, `${kept.size} kept`)
  return kept
}

const FIELDS = ['bytesMoved', 'elapsedMs', 'largestFreeAfter', 'largestFreeBefore', 'moved']

test('compact joins free space and keeps every object', async () => {
  const t = tempPath()
  try {
    const s = await Store.open(t.path, { capacity: SIZE, maxCapacity: SIZE })
    const kept = await fragment(s)
    const before = new Map()
    for (const k of kept.keys()) before.set(k, await s.stat(k))
    const report = await s.compact()
    assert.deepEqual(Object.keys(report).sort(), FIELDS)
    for (const f of FIELDS) assert.equal(typeof report[f], 'number', f)
    assert.ok(report.moved > 0, JSON.stringify(report))
    assert.ok(report.bytesMoved >= report.moved * VALUE, JSON.stringify(report))
    assert.ok(report.largestFreeAfter > report.largestFreeBefore, JSON.stringify(report))
    assert.ok(report.elapsedMs >= 0 && report.elapsedMs < 600_000, `elapsedMs ${report.elapsedMs}`)
    for (const [k, v] of kept) {
      assert.deepEqual(await s.get(k), v, k)
      // Moved objects keep their version, commit time and expiry.
      assert.deepEqual(await s.stat(k), before.get(k), k)
    }
    // The joined space takes an object larger than any hole was.
    const big = pattern(99, report.largestFreeAfter / 2)
    await s.put('big', big)
    assert.deepEqual(await s.get('big'), big)
    await s.close()
    const again = Store.openSync(t.path)
    assert.equal(again.stats().objects, kept.size + 1)
    for (const [k, v] of [...kept].filter((_, i) => i % 17 === 0)) assert.deepEqual(again.getSync(k), v, k)
    again.closeSync()
  } finally {
    t.cleanup()
  }
})

test('compactSync, and compact beside other calls', async () => {
  const t = tempPath()
  try {
    const s = Store.openSync(t.path, { capacity: SIZE, maxCapacity: SIZE })
    const kept = await fragment(s)
    // Reads issued while the compaction runs get the right bytes.
    const keys = [...kept.keys()]
    const [report, ...got] = await Promise.all([s.compact(), ...keys.map((k) => s.get(k))])
    assert.ok(report.moved > 0, JSON.stringify(report))
    got.forEach((b, i) => assert.deepEqual(b, kept.get(keys[i]), keys[i]))
    // Compacted already: a second pass has (almost) nothing left to move.
    const second = s.compactSync()
    assert.deepEqual(Object.keys(second).sort(), FIELDS)
    assert.ok(second.moved < report.moved, JSON.stringify(second))
    for (const [k, v] of kept) assert.deepEqual(s.getSync(k), v, k)
    s.closeSync()
  } finally {
    t.cleanup()
  }
})

test('compact of an empty store, after close and read-only', async () => {
  await withStore({}, async (s) => {
    const report = await s.compact()
    assert.equal(report.moved, 0)
    assert.equal(report.bytesMoved, 0)
    assert.equal(s.compactSync().moved, 0)
  })
  const t = tempPath()
  try {
    const s = await Store.open(t.path, { capacity: SIZE })
    await s.put('k', Buffer.alloc(10_000, 1))
    await s.close()
    await assert.rejects(s.compact(), { code: 'CLOSED' })
    assert.throws(() => s.compactSync(), { code: 'CLOSED' })
    const ro = await Store.open(t.path, { readOnly: true })
    await assert.rejects(ro.compact(), { code: 'UNSUPPORTED' })
    assert.throws(() => ro.compactSync(), { code: 'UNSUPPORTED' })
    await ro.close()
  } finally {
    t.cleanup()
  }
})
