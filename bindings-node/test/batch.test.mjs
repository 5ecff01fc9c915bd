// Atomic batches (`store.batch([{ type: 'put', ... }, { type: 'del', ... }])`,
// as classic-level's) and getMany / getManySync.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'

import { BlobcaskError } from '../lib.mjs'
import { withStore } from './helpers.mjs'

test('a batch commits puts and dels together, each with its outcome', async () => {
  await withStore({}, async (s) => {
    await s.put('gone', Buffer.from('x'))
    const large = randomBytes(300_000)
    const out = await s.batch([
      { type: 'put', key: 'small', value: Buffer.from('abc') },
      { type: 'put', key: Buffer.from('large'), value: large },
      { type: 'del', key: 'gone' },
      { type: 'del', key: 'never-was' },
    ])
    assert.equal(out.length, 4)
    assert.equal(out[0].size, 3)
    assert.ok(out[1].version > out[0].version)
    assert.deepEqual(out.slice(2), [true, false])
    assert.deepEqual(await s.get('small'), Buffer.from('abc'))
    assert.deepEqual(await s.get('large'), large)
    assert.ok(!s.has('gone'))
    assert.deepEqual(s.batchSync([{ type: 'del', key: 'small' }]), [true])
    assert.ok(!s.has('small'))
  })
})

test('a failed condition rejects the whole batch and names the operation', async () => {
  await withStore({}, async (s) => {
    const info = await s.put('taken', Buffer.from('old'))
    await assert.rejects(
      s.batch([
        { type: 'put', key: 'fresh', value: randomBytes(50_000) },
        { type: 'put', key: 'taken', value: Buffer.from('new'), ifAbsent: true },
      ]),
      (e) => e instanceof BlobcaskError && e.code === 'ALREADY_EXISTS' && e.batchOp === 1 && /"taken"/.test(e.message),
    )
    assert.ok(!s.has('fresh'))
    assert.deepEqual(await s.get('taken'), Buffer.from('old'))
    assert.throws(
      () => s.batchSync([{ type: 'del', key: 'taken', ifVersion: info.version + 1 }]),
      (e) => e.code === 'VERSION_MISMATCH' && e.batchOp === 0,
    )
    await s.batch([{ type: 'put', key: 'taken', value: Buffer.from('new'), ifVersion: info.version }])
    assert.deepEqual(await s.get('taken'), Buffer.from('new'))
  })
})

test('a key twice, bad operations and an empty batch', async () => {
  await withStore({}, async (s) => {
    await assert.rejects(
      s.batch([
        { type: 'put', key: 'a', value: Buffer.from('1') },
        { type: 'del', key: 'a' },
      ]),
      (e) => e.code === 'INVALID_ARGUMENT' && e.batchOp === 1,
    )
    assert.ok(!s.has('a'))
    await assert.rejects(s.batch('nope'), (e) => e.code === 'INVALID_ARGUMENT')
    await assert.rejects(s.batch([{ type: 'put', key: 'a' }]), (e) => e.code === 'INVALID_ARGUMENT')
    await assert.rejects(s.batch([{ type: 'delete', key: 'a' }]), (e) => e.code === 'INVALID_ARGUMENT')
    await assert.rejects(s.batch([{ type: 'del', key: 'a', vlaue: 1 }]), (e) => e.code === 'INVALID_ARGUMENT')
    assert.deepEqual(await s.batch([]), [])
    assert.equal(s.stats().objects, 0)
  })
})

test('getMany returns each value in order and undefined for a miss', async () => {
  await withStore({}, async (s) => {
    const big = randomBytes(70_000)
    await s.put('a', Buffer.from('1'))
    await s.put('c', big)
    assert.deepEqual(await s.getMany(['c', 'b', Buffer.from('a')]), [big, undefined, Buffer.from('1')])
    assert.deepEqual(await s.getMany([]), [])
    await assert.rejects(s.getMany('abc'), (e) => e.code === 'INVALID_ARGUMENT')
  })
})

test('getManySync gives what getMany gives: each value in order, undefined for a miss', async () => {
  await withStore({}, async (s) => {
    const big = randomBytes(70_000)
    // Over 1 MiB: lent to JavaScript rather than copied (src/results.rs).
    const huge = randomBytes(3 << 20)
    await s.put('a', Buffer.from('1'))
    await s.put('c', big)
    await s.put('h', huge)
    await s.put('empty', Buffer.alloc(0))
    const keys = ['c', 'b', Buffer.from('a'), 'h', 'empty', 'c']
    const expected = [big, undefined, Buffer.from('1'), huge, Buffer.alloc(0), big]
    const got = s.getManySync(keys)
    assert.ok(Array.isArray(got))
    assert.deepEqual(got, expected)
    assert.deepEqual(got, await s.getMany(keys))
    for (const b of got.filter((b) => b !== undefined)) assert.ok(Buffer.isBuffer(b))
    // The Buffers are the caller's: writing into them changes nothing stored.
    got[0][0] ^= 0xff
    got[3][0] ^= 0xff
    assert.deepEqual(s.getManySync(['c', 'h']), [big, huge])
    assert.deepEqual(s.getManySync([]), [])
  })
})

test('getManySync refuses what getMany refuses, and extra arguments', async () => {
  await withStore({}, async (s) => {
    await s.put('a', Buffer.from('1'))
    for (const bad of ['abc', undefined, { 0: 'a', length: 1 }]) {
      assert.throws(() => s.getManySync(bad), (e) => e instanceof BlobcaskError && e.code === 'INVALID_ARGUMENT', String(bad))
      await assert.rejects(s.getMany(bad), (e) => e.code === 'INVALID_ARGUMENT', String(bad))
    }
    // A bad key anywhere refuses the whole call.
    for (const keys of [['a', ''], ['a', 5]]) {
      assert.throws(() => s.getManySync(keys), (e) => e.code === 'INVALID_ARGUMENT', String(keys))
      await assert.rejects(s.getMany(keys), (e) => e.code === 'INVALID_ARGUMENT', String(keys))
    }
    assert.throws(() => s.getManySync(['a'], 'utf8'), (e) => e.code === 'INVALID_ARGUMENT')
  })
})

test('lib.d.ts declares getManySync beside getMany', () => {
  const dts = readFileSync(new URL('../lib.d.ts', import.meta.url), 'utf8')
  assert.match(dts, /\n\s*getMany\(keys: Key\[\]\): Promise<Array<Buffer \| undefined>>\n/)
  assert.match(dts, /\n\s*getManySync\(keys: Key\[\]\): Array<Buffer \| undefined>\n/)
})
