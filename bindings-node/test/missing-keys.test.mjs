// A key with no object: `get` and `getSync` give `undefined`, as
// classic-level's `get` resolves; NOT_FOUND from every other call that
// needs one (read, stat, delete), as in the core and the other bindings;
// `has` asks without an error (node --test).
import { test } from 'node:test'
import assert from 'node:assert/strict'

import { BlobcaskError } from '../lib.mjs'

import { withStore } from './helpers.mjs'

/** Every call that needs an object, as Promise or Sync (`get` does not). */
const CALLS = {
  read: (s, k) => s.read(k, 0, 1),
  stat: (s, k) => s.stat(k),
  delete: (s, k) => s.delete(k),
  readSync: (s, k) => s.readSync(k, 0, 1),
  statSync: (s, k) => s.statSync(k),
  deleteSync: (s, k) => s.deleteSync(k),
}

async function expectNotFound(s, key, why) {
  assert.equal(s.has(key), false, `${why}: has`)
  assert.equal(await s.get(key), undefined, `${why}: get`)
  assert.equal(s.getSync(key), undefined, `${why}: getSync`)
  for (const [name, call] of Object.entries(CALLS)) {
    let result
    try {
      result = await call(s, key)
    } catch (e) {
      assert.ok(e instanceof BlobcaskError, `${why}: ${name} threw ${e}`)
      assert.equal(e.code, 'NOT_FOUND', `${why}: ${name}: ${e.message}`)
      continue
    }
    assert.fail(`${why}: ${name} returned ${result} instead of failing with NOT_FOUND`)
  }
}

test('a key never stored is undefined for get, NOT_FOUND for read, stat and delete, Promise and Sync', async () => {
  await withStore({}, async (s) => {
    await expectNotFound(s, 'never', 'string key')
    await expectNotFound(s, Buffer.from([0, 1, 2]), 'Buffer key')
    await expectNotFound(s, new Uint8Array([9]), 'Uint8Array key')
    // Promise calls reject (never throw synchronously), Sync calls throw.
    const p = s.read('never')
    assert.ok(p instanceof Promise)
    await assert.rejects(p, { code: 'NOT_FOUND' })
    assert.throws(() => s.readSync('never'), { code: 'NOT_FOUND' })
    const g = s.get('never')
    assert.ok(g instanceof Promise)
    assert.equal(await g, undefined)
  })
})

test('a deleted key is undefined to get and NOT_FOUND to the others, inline or on the heap', async () => {
  await withStore({}, async (s) => {
    for (const [key, size] of [['small', 10], ['large', 100_000], ['mib', 1 << 20]]) {
      await s.put(key, Buffer.alloc(size, 1))
      assert.equal(s.has(key), true)
      s.getSync(key) // a read first, so that a cached copy would show
      await s.delete(key)
      await expectNotFound(s, key, `${key} after delete`)
    }
  })
})

test('NOT_FOUND names the key in its message', async () => {
  await withStore({}, async (s) => {
    await assert.rejects(s.read('photos/missing.jpg'), (e) => e.code === 'NOT_FOUND' && /photos\/missing\.jpg/.test(e.message))
    assert.throws(() => s.statSync('other/missing'), (e) => e.code === 'NOT_FOUND' && /other\/missing/.test(e.message))
  })
})

test('a miss is undefined, an empty value an empty Buffer: the two stay apart', async () => {
  await withStore({}, async (s) => {
    await s.put('empty', Buffer.alloc(0))
    const empty = await s.get('empty')
    assert.ok(Buffer.isBuffer(empty) && empty.length === 0)
    assert.ok(Buffer.isBuffer(s.getSync('empty')))
    assert.equal(await s.get('absent'), undefined)
    assert.equal(s.getSync('absent'), undefined)
    // Other errors still reject: a miss is the only thing `get` absorbs.
    await assert.rejects(s.get(''), { code: 'INVALID_ARGUMENT' })
    assert.throws(() => s.getSync(''), { code: 'INVALID_ARGUMENT' })
    await s.close()
    await assert.rejects(s.get('absent'), { code: 'CLOSED' })
    assert.throws(() => s.getSync('absent'), { code: 'CLOSED' })
  })
})
