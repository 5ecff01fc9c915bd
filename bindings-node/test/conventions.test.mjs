// What Node users expect from classic-level and lmdb-js (issue 42): string
// values stored as UTF-8, extra arguments refused, `Symbol.asyncDispose`,
// `readInto`, progress from `bulkLoad` (node --test).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'

import { BlobcaskError, Store } from '../lib.mjs'

import { tempPath, withStore } from './helpers.mjs'

test('a string value is stored as its UTF-8 bytes, by put, putSync and bulkLoad', async () => {
  await withStore({}, async (s) => {
    const text = 'héllo, 世界 🐈'
    await s.put('p', text)
    s.putSync('ps', text)
    await s.bulkLoad([['b', text]])
    for (const k of ['p', 'ps', 'b']) {
      const v = await s.get(k)
      assert.ok(Buffer.isBuffer(v), k)
      assert.deepEqual(v, Buffer.from(text, 'utf8'), k)
      assert.equal(v.toString(), text, k)
      assert.equal((await s.stat(k)).size, Buffer.byteLength(text), k)
    }
    await s.put('empty', '')
    assert.equal((await s.get('empty')).length, 0)
    // A large one goes through the helper-thread path like a Buffer.
    const big = 'x'.repeat(3 << 20)
    await s.put('big', big)
    assert.equal((await s.get('big')).toString(), big)
  })
})

test('a string value without a UTF-8 form, and other non-bytes values, are refused with a clear message', async () => {
  await withStore({}, async (s) => {
    const refused = (what) => (e) =>
      e instanceof BlobcaskError && e.code === 'INVALID_ARGUMENT' && what.test(e.message) && !/TypedArray|napi/i.test(e.message)
    await assert.rejects(s.put('k', 'a\ud800b'), refused(/lone surrogate/))
    assert.throws(() => s.putSync('k', '\udfff'), refused(/lone surrogate/))
    for (const v of [5, 5n, true, null, undefined, {}, [1, 2], new ArrayBuffer(4), new Float64Array(2), new DataView(new ArrayBuffer(2))]) {
      await assert.rejects(s.put('k', v), refused(/must be a Buffer, a Uint8Array or a string/), String(v))
      assert.throws(() => s.putSync('k', v), refused(/must be a Buffer, a Uint8Array or a string/), String(v))
    }
    await assert.rejects(s.bulkLoad([['a', 'ok'], ['b', 7]]), refused(/item 1: the value must be a Buffer, a Uint8Array or a string, not number/))
    assert.equal((await s.get('a')).toString(), 'ok', 'the item before it was loaded')
    // Nothing of the refused puts was stored.
    assert.equal(s.has('k'), false)
    // An upload's parts stay bytes only: their offsets count bytes.
    const up = await s.beginUpload('u', 5)
    await assert.rejects(up.writePart(0, 'hello'), refused(/a part must be a Buffer or Uint8Array, not string/))
    await up.abort()
  })
})

test('an extra argument is refused, never ignored', async () => {
  await withStore({}, async (s, path) => {
    await s.put('k', Buffer.from('v'))
    const extra = (e) => e instanceof BlobcaskError && e.code === 'INVALID_ARGUMENT' && /takes at most \d+ arguments?, not \d+/.test(e.message)
    const rejecting = {
      'put(k, v, conditions, extra)': () => s.put('k', Buffer.from('w'), {}, 60000),
      'get(k, encoding)': () => s.get('k', 'utf8'),
      'read(k, o, l, extra)': () => s.read('k', 0, 1, 2),
      'readInto(k, buf, o, extra)': () => s.readInto('k', Buffer.alloc(1), 0, 1),
      'stat(k, extra)': () => s.stat('k', {}),
      'delete(k, extra)': () => s.delete('k', {}),
      'beginUpload(k, n, extra)': () => s.beginUpload('u', 1, {}),
      'bulkLoad(items, options, extra)': () => s.bulkLoad([], {}, 1),
      'grow(n, extra)': () => s.grow(64 << 20, 1),
      'sync(extra)': () => s.sync(1),
      'backup(dest, extra)': () => s.backup(path + '.copy', { progress() {} }),
      'compact(extra)': () => s.compact(1),
      'Store.open(path, options, extra)': () => Store.open(path + '.2', {}, 1),
      'batch(operations, options)': () => s.batch([{ type: 'put', key: 'b', value: Buffer.from('v') }], { sync: true }),
      'list(prefix, extra)': async () => { for await (const _ of s.list('', 1)) break },
      'getMany(keys, extra)': () => s.getMany(['k'], 'utf8'),
    }
    for (const [what, call] of Object.entries(rejecting)) {
      await assert.rejects(call(), extra, what)
    }
    const throwing = {
      'putSync(k, v, c, extra)': () => s.putSync('k', Buffer.from('w'), null, 1),
      'getSync(k, extra)': () => s.getSync('k', 'utf8'),
      'getManySync(keys, extra)': () => s.getManySync(['k'], 'utf8'),
      'batchSync(operations, options)': () => s.batchSync([{ type: 'del', key: 'k' }], { sync: true }),
      'readSync(k, o, l, extra)': () => s.readSync('k', 0, 1, 1),
      'readIntoSync(k, b, o, extra)': () => s.readIntoSync('k', Buffer.alloc(1), 0, 1),
      'statSync(k, extra)': () => s.statSync('k', 1),
      'deleteSync(k, extra)': () => s.deleteSync('k', 1),
      'has(k, extra)': () => s.has('k', 1),
      'stats(extra)': () => s.stats(1),
      'listUploads(extra)': () => s.listUploads(1),
      'abortUpload(id, extra)': () => s.abortUpload(1, 2),
      'growSync(n, extra)': () => s.growSync(64 << 20, 1),
      'syncSync(extra)': () => s.syncSync(1),
      'backupSync(dest, extra)': () => s.backupSync(path + '.copy', 1),
      'compactSync(extra)': () => s.compactSync(1),
      'Store.openSync(path, options, extra)': () => Store.openSync(path + '.2', {}, 1),
    }
    for (const [what, call] of Object.entries(throwing)) {
      assert.throws(call, extra, what)
    }
    const up = await s.beginUpload('u', 1)
    await assert.rejects(up.writePart(0, Buffer.from('x'), undefined, 1), extra)
    await assert.rejects(up.commit({}, 1), extra)
    await assert.rejects(up.abort(1), extra)
    await up.abort()
    // Nothing those calls would have done was done.
    assert.equal((await s.get('k')).toString(), 'v')
    assert.equal(existsSync(path + '.copy'), false)
    assert.equal(existsSync(path + '.2'), false)
    // `undefined` for an optional argument is no extra argument.
    assert.equal((await s.read('k', 0, undefined)).toString(), 'v')
    await s.put('k2', Buffer.from('x'), undefined)
  })
})

test('Symbol.asyncDispose closes a store and aborts an upload', { skip: typeof Symbol.asyncDispose !== 'symbol' && 'no Symbol.asyncDispose' }, async () => {
  const t = tempPath()
  try {
    const s = await Store.open(t.path, { capacity: 16 << 20 })
    assert.equal(typeof s[Symbol.asyncDispose], 'function')
    assert.equal(Object.getOwnPropertyDescriptor(Store.prototype, Symbol.asyncDispose).enumerable, false)
    const up = await s.beginUpload('u', 4096)
    await up.writePart(0, Buffer.alloc(4096, 1))
    await up[Symbol.asyncDispose]()
    assert.equal(s.listUploads().length, 0, 'the upload was aborted')
    await assert.rejects(up.commit(), { code: 'CLOSED' })
    // Disposing a committed upload changes nothing.
    const done = await s.beginUpload('v', 3)
    await done.writePart(0, Buffer.from('abc'))
    await done.commit()
    await done[Symbol.asyncDispose]()
    assert.equal((await s.get('v')).toString(), 'abc')
    await s[Symbol.asyncDispose]()
    assert.throws(() => s.has('v'), { code: 'CLOSED' })
    // The lock is released: the store opens again.
    const again = await Store.open(t.path)
    assert.equal((await again.get('v')).toString(), 'abc')
    await again[Symbol.asyncDispose]()
    await again[Symbol.asyncDispose]() // a second dispose does nothing
  } finally {
    t.cleanup()
  }
})

test('readInto fills a caller\'s buffer from an offset and says how much', async () => {
  await withStore({}, async (s) => {
    const value = Buffer.from(Array.from({ length: 10_000 }, (_, i) => i % 251))
    await s.put('k', value)
    const buf = Buffer.alloc(4096, 0xee)
    assert.equal(await s.readInto('k', buf), 4096)
    assert.deepEqual(buf, value.subarray(0, 4096))
    assert.equal(await s.readInto('k', buf, 8000), 2000, 'fewer at the end')
    assert.deepEqual(buf.subarray(0, 2000), value.subarray(8000))
    assert.deepEqual(buf.subarray(2000), value.subarray(2000, 4096), 'the rest is untouched')
    assert.equal(s.readIntoSync('k', buf, 100), 4096)
    assert.deepEqual(buf, value.subarray(100, 4196))
    // Any ArrayBufferView, at its own offset within its ArrayBuffer.
    const backing = new ArrayBuffer(64)
    const view = new Uint32Array(backing, 16, 4)
    assert.equal(await s.readInto('k', view, 4), 16)
    assert.deepEqual(Buffer.from(backing, 16, 16), value.subarray(4, 20))
    assert.deepEqual(Buffer.from(backing, 0, 16), Buffer.alloc(16))
    assert.equal(await s.readInto('k', new DataView(backing, 0, 2)), 2)
    assert.equal(await s.readInto('k', Buffer.alloc(0)), 0)
    // Errors write nothing.
    const clean = Buffer.alloc(8, 7)
    await assert.rejects(s.readInto('missing', clean), { code: 'NOT_FOUND' })
    await assert.rejects(s.readInto('k', clean, 10_001), { code: 'INVALID_ARGUMENT' })
    await assert.rejects(s.readInto('k', [0, 0]), (e) => e.code === 'INVALID_ARGUMENT' && /Buffer, TypedArray or DataView/.test(e.message))
    await assert.rejects(s.readInto('k', new ArrayBuffer(8)), { code: 'INVALID_ARGUMENT' })
    assert.throws(() => s.readIntoSync('k', 'text'), { code: 'INVALID_ARGUMENT' })
    assert.deepEqual(clean, Buffer.alloc(8, 7))
    // A large object comes from the helper thread the same way.
    const big = Buffer.alloc(3 << 20, 5)
    await s.put('big', big)
    const into = Buffer.alloc(big.length + 10)
    assert.equal(await s.readInto('big', into), big.length)
    assert.deepEqual(into.subarray(0, big.length), big)
  })
})

test('bulkLoad reports progress at most four times a second, then the totals', async () => {
  await withStore({}, async (s) => {
    const calls = []
    async function* slow() {
      for (let i = 0; i < 2000; i++) {
        if (i % 256 === 0) await sleep(60)
        yield [`k${i}`, i % 2 ? Buffer.alloc(10, 1) : 'ten bytes!']
      }
    }
    const start = performance.now()
    const report = await s.bulkLoad(slow(), { progress: (objects, bytes) => calls.push([objects, bytes]) })
    const elapsed = (performance.now() - start) / 1000
    assert.deepEqual(calls.at(-1), [2000, 20_000])
    assert.deepEqual([report.objects, report.bytes], [2000, 20_000])
    assert.ok(calls.length >= 2, 'no progress before the end')
    assert.ok(calls.length <= elapsed / 0.25 + 2, `${calls.length} calls in ${elapsed} s`)
    for (let i = 1; i < calls.length; i++) assert.ok(calls[i][0] >= calls[i - 1][0], 'progress went backwards')
    assert.ok(calls.every(([o, b]) => b === 10 * o))
  })
})

test('bulkLoad refuses bad options, and a progress that throws stops the load after a prefix', async () => {
  await withStore({}, async (s) => {
    const bad = (what) => (e) => e.code === 'INVALID_ARGUMENT' && what.test(e.message)
    await assert.rejects(s.bulkLoad([['a', 'x']], { progress: 5 }), bad(/progress must be a function/))
    await assert.rejects(s.bulkLoad([['a', 'x']], { progres: () => {} }), bad(/unknown bulkLoad option "progres"/))
    await assert.rejects(s.bulkLoad([['a', 'x']], 'fast'), bad(/options must be an object/))
    assert.equal(s.has('a'), false, 'a refused option loads nothing')
    await s.bulkLoad([['a', 'x']], { progress: null })
    assert.equal(s.has('a'), true)

    async function* slow() {
      for (let i = 0; i < 100; i++) {
        await sleep(10)
        yield [`p${i}`, Buffer.from([i])]
      }
    }
    const angry = new Error('stop')
    let seen = 0
    await assert.rejects(
      s.bulkLoad(slow(), { progress: (objects) => { seen = objects; throw angry } }),
      (e) => e === angry,
    )
    assert.ok(seen > 0 && seen < 100, `${seen}`)
    for (let i = 0; i < 100; i++) assert.equal(s.has(`p${i}`), i < seen, `p${i}`)
    // The final call's exception rejects too (the load itself is done).
    await assert.rejects(s.bulkLoad([['z', 'z']], { progress: () => { throw angry } }), (e) => e === angry)
    assert.equal(s.has('z'), true)
  })
})

test('an unknown open option is refused, never dropped, and nothing is created', async () => {
  const { path, cleanup } = tempPath()
  const unknown = (key) => (e) =>
    e instanceof BlobcaskError && e.code === 'INVALID_ARGUMENT' &&
    e.message.includes(`unknown open option ${JSON.stringify(key)}`) && e.message.includes('eviction')
  // A misspelt eviction would open a store that never evicts; a misspelt
  // maxCapacity one without the limit asked for.
  await assert.rejects(Store.open(path, { evict: 's3fifo' }), unknown('evict'))
  assert.throws(() => Store.openSync(path, { maxcapacity: 1 << 24 }), unknown('maxcapacity'))
  for (const bad of [5, 'hash', [1]]) {
    await assert.rejects(Store.open(path, bad), (e) => e.code === 'INVALID_ARGUMENT' && /open options must be an object/.test(e.message))
  }
  assert.equal(existsSync(path), false, 'nothing was created')
  // Every documented option is known (undefined ones are left to their defaults).
  const s = await Store.open(path, {
    capacity: undefined, index: 'hash', inlineThreshold: undefined, maxCapacity: undefined, ioEngine: undefined,
    directIo: undefined, create: true, createNew: undefined, readOnly: undefined, salvage: undefined,
    cacheBytes: undefined, cacheFraction: undefined, warmUp: undefined, durability: 'sync', eviction: 'none',
  })
  await s.close()
  cleanup()
})
