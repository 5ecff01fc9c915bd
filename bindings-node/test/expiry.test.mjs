// Expiry: put(key, value, { ttl }) in milliseconds; an expired object is
// invisible at once (and removed by the store in the background).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'

import { withStore } from './helpers.mjs'

/** Waits until the wall clock is past `t` (milliseconds since the epoch). */
async function waitPast(t) {
  while (Date.now() <= t) await sleep(t - Date.now() + 10)
}

/** `key` has no object, by every call that looks. */
async function assertGone(s, key) {
  assert.equal(await s.get(key), undefined, key)
  await assert.rejects(s.read(key, 0, 1), { code: 'NOT_FOUND' }, key)
  await assert.rejects(s.stat(key), { code: 'NOT_FOUND' }, key)
  assert.equal(s.getSync(key), undefined, key)
  assert.throws(() => s.statSync(key), { code: 'NOT_FOUND' }, key)
  assert.equal(s.has(key), false, key)
}

const near = (a, b, what) => assert.ok(Math.abs(a - b) < 1, `${what}: ${a} vs ${b}`)

test('an object with a ttl is readable, then gone', async () => {
  await withStore({ index: 'btree' }, async (s) => {
    const keep = randomBytes(20_000)
    await s.put('keep', keep)
    const value = randomBytes(50_000)
    const heap = await s.put('brief/heap', value, { ttl: 300 })
    const inline = s.putSync('brief/inline', Buffer.from('tiny'), { ttl: 300 })
    assert.equal(heap.inline, false)
    assert.equal(inline.inline, true)
    for (const info of [heap, inline]) {
      assert.equal(typeof info.expires, 'number')
      near(info.expires, info.created + 300, 'expires')
    }
    const st = await s.stat('brief/heap')
    assert.equal(st.version, heap.version)
    assert.equal(st.expires, heap.expires)
    assert.equal(s.statSync('brief/inline').expires, inline.expires)
    assert.equal((await s.stat('keep')).expires, null)
    assert.deepEqual(await s.get('brief/heap'), value)
    assert.ok(s.has('brief/inline'))
    const listed = async (prefix) => {
      const keys = []
      for await (const k of s.list(prefix)) keys.push(k.toString())
      return keys
    }
    assert.deepEqual(await listed('brief/'), ['brief/heap', 'brief/inline'])

    await waitPast(Math.max(heap.expires, inline.expires))
    await assertGone(s, 'brief/heap')
    await assertGone(s, 'brief/inline')
    await assert.rejects(s.delete('brief/heap'), { code: 'NOT_FOUND' })
    assert.deepEqual(await listed(''), ['keep'])
    // A create-only put sees no object there.
    await s.put('brief/heap', Buffer.from('again'), { ifAbsent: true })
    assert.deepEqual(await s.get('brief/heap'), Buffer.from('again'))
    assert.equal((await s.stat('brief/heap')).expires, null)
    assert.deepEqual(await s.get('keep'), keep)
  })
})

test('ttl takes fractions of a millisecond; a put without one clears it', async () => {
  await withStore({}, async (s) => {
    const hour = await s.put('hour', Buffer.from('v'), { ttl: 3_600_000 })
    near(hour.expires, hour.created + 3_600_000, 'an hour')
    const frac = s.putSync('frac', Buffer.from('v'), { ttl: 1500.5 })
    near(frac.expires, frac.created + 1500.5, 'fractional')
    assert.equal(typeof s.putSync('micro', Buffer.from('v'), { ttl: 0.001 }).expires, 'number')
    const century = s.putSync('century', Buffer.from('v'), { ttl: 100 * 365 * 24 * 3600 * 1000 })
    assert.ok(century.expires > Date.now() + 99 * 365 * 24 * 3600 * 1000)
    // Combined with a condition.
    const cond = await s.put('hour', Buffer.from('w'), { ifVersion: hour.version, ttl: 60_000 })
    near(cond.expires, cond.created + 60_000, 'with ifVersion')
    // A put without a ttl replaces the object with one that never expires.
    assert.equal((await s.put('hour', Buffer.from('x'))).expires, null)
    assert.equal((await s.stat('hour')).expires, null)
    assert.equal(s.putSync('hour', Buffer.from('y'), { ttl: undefined }).expires, null)
    // Conditions that are not an object, or a misspelt field, are refused
    // (a number given as the ttl would otherwise store an object that never
    // expires); nothing is stored.
    for (const bad of [60_000, 'ttl', true, [60_000], { tll: 60_000 }, { TTL: 5 }]) {
      await assert.rejects(s.put('refused', Buffer.from('x'), bad), { code: 'INVALID_ARGUMENT' }, String(bad))
      assert.throws(() => s.putSync('refused', Buffer.from('x'), bad), { code: 'INVALID_ARGUMENT' }, String(bad))
    }
    assert.equal(await s.has('refused'), false)
    // A null field is an absent one, for every field.
    assert.equal((await s.put('nulls', Buffer.from('x'), { ifAbsent: null, ifVersion: null, ttl: null })).expires, null)
    // null is no ttl too (as from JSON), for both calls, over one that had one.
    await s.put('nul', Buffer.from('x'), { ttl: 60_000 })
    assert.equal((await s.put('nul', Buffer.from('y'), { ttl: null })).expires, null)
    s.putSync('nul', Buffer.from('z'), { ttl: 60_000 })
    assert.equal(s.putSync('nul', Buffer.from('w'), { ttl: null }).expires, null)
    assert.equal((await s.stat('nul')).expires, null)
    // A new ttl replaces the old one: the short one no longer applies.
    await s.put('k', Buffer.from('short'), { ttl: 200 })
    const long = await s.put('k', Buffer.from('long'), { ttl: 3_600_000 })
    await sleep(300)
    assert.deepEqual(await s.get('k'), Buffer.from('long'))
    assert.equal((await s.stat('k')).expires, long.expires)
  })
})

const BAD_TYPES = [true, '5', 10n, {}, [1]]
const BAD_VALUES = [-1, -0.5, 0, -0, 0.0005 /* under 1 µs */, NaN, Infinity, -Infinity, 1e15 /* above ~100 years */, 1e300]

test('a bad ttl is INVALID_ARGUMENT and nothing is stored', async () => {
  await withStore({}, async (s) => {
    const value = randomBytes(10_000)
    for (const ttl of BAD_TYPES) {
      // Our message, not napi's about Rust types.
      await assert.rejects(s.put('k', value, { ttl }), (e) => e.code === 'INVALID_ARGUMENT' && /^ttl must be a number of milliseconds or null, not /.test(e.message) && !('napiStatus' in e), String(ttl))
      assert.throws(() => s.putSync('k', value, { ttl }), { code: 'INVALID_ARGUMENT' }, String(ttl))
    }
    for (const ttl of BAD_VALUES) {
      await assert.rejects(s.put('k', value, { ttl }), (e) => e.code === 'INVALID_ARGUMENT' && /ttl/.test(e.message), String(ttl))
      assert.throws(() => s.putSync('k', value, { ttl }), (e) => e.code === 'INVALID_ARGUMENT' && /ttl/.test(e.message), String(ttl))
    }
    assert.equal(s.has('k'), false)
    assert.equal(s.stats().objects, 0)
    assert.equal(s.stats().allocatedBytes, 0, 'a refused put kept space')
    // A refused ttl does not touch what the key holds.
    const first = await s.put('k', Buffer.from('one'))
    for (const ttl of [true, -1, 0, NaN]) {
      await assert.rejects(s.put('k', Buffer.from('two'), { ttl }), { code: 'INVALID_ARGUMENT' })
    }
    assert.deepEqual(await s.get('k'), Buffer.from('one'))
    assert.equal((await s.stat('k')).version, first.version)
  })
})

test('puts with a ttl issued together expire together', async () => {
  await withStore({}, async (s) => {
    const values = Array.from({ length: 16 }, (_, i) => randomBytes(i % 2 ? 100 : 30_000))
    const infos = await Promise.all(values.map((v, i) => s.put(`k${i}`, v, { ttl: 300 })))
    await s.put('stays', Buffer.from('v'))
    for (const [i, v] of values.entries()) assert.deepEqual(await s.get(`k${i}`), v)
    await waitPast(Math.max(...infos.map((i) => i.expires)))
    for (let i = 0; i < values.length; i++) await assertGone(s, `k${i}`)
    assert.deepEqual(await s.get('stays'), Buffer.from('v'))
  })
})
