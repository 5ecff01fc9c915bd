// bulkLoad: any iterable of [key, value] pairs, checked like put, copied as
// taken, a prefix loaded when it stops early (node --test).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'

import { BlobcaskError, Store } from '../lib.mjs'

import { tempPath, withStore } from './helpers.mjs'

test('loads an array, a Map, a generator and an async generator', async () => {
  await withStore({ index: 'btree' }, async (s) => {
    const pairs = Array.from({ length: 50 }, (_, i) => [`array/${i}`, randomBytes(i * 100)])
    let r = await s.bulkLoad(pairs)
    assert.deepEqual(Object.keys(r).sort(), ['bytes', 'bytesPerSec', 'elapsedMs', 'groups', 'objects', 'objectsPerSec'])
    assert.equal(r.objects, 50)
    assert.equal(r.bytes, pairs.reduce((n, [, v]) => n + v.length, 0))
    assert.ok(r.groups >= 1)
    assert.ok(r.elapsedMs >= 0)
    for (const [k, v] of pairs) assert.deepEqual(s.getSync(k), v)

    const map = new Map([['map/a', Buffer.from('A')], ['map/b', new Uint8Array([1, 2])]])
    r = await s.bulkLoad(map)
    assert.equal(r.objects, 2)
    assert.deepEqual(await s.get('map/b'), Buffer.from([1, 2]))

    function* gen() {
      for (let i = 0; i < 10; i++) yield [Buffer.from(`gen/${i}`), Buffer.alloc(10, i)]
    }
    r = await s.bulkLoad(gen())
    assert.equal(r.objects, 10)
    assert.deepEqual(await s.get('gen/7'), Buffer.alloc(10, 7))

    async function* agen() {
      for (let i = 0; i < 10; i++) {
        await new Promise((resolve) => setImmediate(resolve))
        yield [`agen/${i}`, Buffer.alloc(5000, i)]
      }
    }
    r = await s.bulkLoad(agen())
    assert.equal(r.objects, 10)
    assert.deepEqual(await s.get('agen/9'), Buffer.alloc(5000, 9))
    // Ordered listing sees them all.
    let n = 0
    for await (const _ of s.list('gen/')) n++
    assert.equal(n, 10)
  })
})

test('an empty iterable loads nothing', async () => {
  await withStore({}, async (s) => {
    const r = await s.bulkLoad([])
    assert.equal(r.objects, 0)
    assert.equal(r.bytes, 0)
    assert.equal(s.stats().objects, 0)
  })
})

test('many items across batches, replacing existing keys, with large values', async () => {
  await withStore({ capacity: 64 << 20 }, async (s) => {
    await s.put('item/5', Buffer.from('old'))
    const count = 3000
    const value = (i) => Buffer.alloc(i % 100 === 0 ? 200_000 : 300, i & 0xff)
    function* items() {
      for (let i = 0; i < count; i++) yield [`item/${i}`, value(i)]
    }
    const r = await s.bulkLoad(items())
    assert.equal(r.objects, count)
    assert.equal(s.stats().objects, count)
    for (const i of [0, 5, 1023, 1024, 1025, 2047, 2999]) assert.deepEqual(s.getSync(`item/${i}`), value(i), `item ${i}`)
  })
})

test('values are copied as they are taken: an iterable may reuse its Buffer', async () => {
  await withStore({}, async (s) => {
    const buf = Buffer.alloc(4096)
    function* reusing() {
      for (let i = 0; i < 20; i++) {
        buf.fill(i)
        yield [`k${i}`, buf]
      }
    }
    await s.bulkLoad(reusing())
    for (let i = 0; i < 20; i++) assert.deepEqual(s.getSync(`k${i}`), Buffer.alloc(4096, i))
  })
})

test('a bad item ends the load with INVALID_ARGUMENT; the items before it are loaded', async () => {
  const bad = [
    ['not a pair', 'just a string'],
    ['a one-element array', ['k']],
    ['a three-element array', ['k', Buffer.from('x'), 1]],
    ['a number key', [42, Buffer.from('x')]],
    ['a null value', ['k', null]],
    ['a string value without a UTF-8 form', ['k', 'a\ud800']],
    ['a boolean value', ['k', true]],
    ['a number value', ['k', 7]],
    ['an Int16Array value', ['k', new Int16Array(2)]],
    ['an ArrayBuffer value', ['k', new ArrayBuffer(2)]],
  ]
  for (const [what, item] of bad) {
    await withStore({}, async (s) => {
      const items = [['before/0', Buffer.from('a')], ['before/1', Buffer.from('b')], item, ['after', Buffer.from('c')]]
      await assert.rejects(s.bulkLoad(items), (e) => {
        assert.ok(e instanceof BlobcaskError, what)
        assert.equal(e.code, 'INVALID_ARGUMENT', what)
        assert.match(e.message, /item 2\b/, what)
        return true
      })
      assert.deepEqual(s.getSync('before/1'), Buffer.from('b'), what)
      assert.equal(s.has('after'), false, what)
      assert.equal(s.has('k'), false, what)
    })
  }
})

test('an exception of the iterable ends the load; the items before it are loaded', async () => {
  await withStore({}, async (s) => {
    const boom = new Error('source failed')
    async function* failing() {
      yield ['one', Buffer.from('1')]
      yield ['two', Buffer.from('2')]
      throw boom
    }
    await assert.rejects(s.bulkLoad(failing()), (e) => e === boom)
    assert.deepEqual(s.getSync('two'), Buffer.from('2'))
  })
})

test('what is not an iterable of pairs is INVALID_ARGUMENT', async () => {
  await withStore({}, async (s) => {
    for (const items of [undefined, null, 5, {}, { length: 1, 0: ['k', Buffer.from('x')] }]) {
      await assert.rejects(s.bulkLoad(items), { code: 'INVALID_ARGUMENT' }, String(items))
    }
    assert.equal(s.stats().objects, 0)
  })
})

test('errors of the store reject with their code', async () => {
  await withStore({}, async (s) => {
    await assert.rejects(s.bulkLoad([['k'.repeat(2000), Buffer.from('x')]]), { code: 'TOO_LARGE' })
    await assert.rejects(s.bulkLoad([['', Buffer.from('x')]]), { code: 'INVALID_ARGUMENT' })
    // A failed load leaves the store usable.
    assert.equal((await s.bulkLoad([['fine', Buffer.from('x')]])).objects, 1)
  })
  // A store that cannot hold the load: NO_SPACE, and the iterable is not
  // drained to the end.
  const t = tempPath()
  try {
    const s = await Store.open(t.path, { capacity: 16 << 20, maxCapacity: 16 << 20 })
    let taken = 0
    function* tooMuch() {
      for (let i = 0; i < 200; i++) {
        taken++
        yield [`big/${i}`, Buffer.alloc(1 << 20, i)]
      }
    }
    await assert.rejects(s.bulkLoad(tooMuch()), { code: 'NO_SPACE' })
    assert.ok(taken < 200, `took all ${taken} items`)
    await s.close()
  } finally {
    t.cleanup()
  }
})

test('a read-only store refuses a load with UNSUPPORTED', async () => {
  const t = tempPath()
  try {
    const w = await Store.open(t.path, { capacity: 16 << 20 })
    await w.close()
    const r = await Store.open(t.path, { readOnly: true })
    await assert.rejects(r.bulkLoad([['k', Buffer.from('x')]]), { code: 'UNSUPPORTED' })
    await assert.rejects(r.bulkLoad([]), { code: 'UNSUPPORTED' })
    await r.close()
  } finally {
    t.cleanup()
  }
})
