// Tests for the blobcask Node package (node --test).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'

import { Store, crc32c } from '../lib.mjs'
import cjs from '../lib.js'

import { tempPath, withStore } from './helpers.mjs'

test('CommonJS and ESM export the same class', () => {
  assert.equal(cjs.Store, Store)
})

test('put, get, read, stat, has, delete', async () => {
  await withStore({}, async (s) => {
    const value = randomBytes(100_000)
    const info = await s.put('photos/cat.jpg', value)
    assert.equal(info.size, 100_000)
    assert.equal(typeof info.version, 'number')
    assert.ok(Number.isSafeInteger(info.version))
    assert.equal(info.inline, false)
    assert.ok(Math.abs(info.created - Date.now()) < 60_000)
    assert.deepEqual(await s.get('photos/cat.jpg'), value)
    assert.deepEqual(await s.get(Buffer.from('photos/cat.jpg')), value, 'string and Buffer keys match')
    assert.deepEqual(await s.read('photos/cat.jpg', 5000, 10), value.subarray(5000, 5010))
    assert.deepEqual(await s.read('photos/cat.jpg', 99_990, 100), value.subarray(99_990))
    assert.deepEqual(await s.read('photos/cat.jpg', 100), value.subarray(100))
    const st = await s.stat('photos/cat.jpg')
    assert.equal(st.version, info.version)
    assert.ok(s.has('photos/cat.jpg'))
    await s.delete('photos/cat.jpg')
    assert.ok(!s.has('photos/cat.jpg'))
    await s.put('u8', new Uint8Array([1, 2, 3]))
    assert.deepEqual([...(await s.get('u8'))], [1, 2, 3])
    assert.ok((await s.stat('u8')).inline)
  })
})

test('errors carry a code', async () => {
  await withStore({}, async (s, path) => {
    assert.equal(await s.get('missing'), undefined)
    await assert.rejects(s.stat('missing'), (e) => e instanceof Error && e.code === 'NOT_FOUND')
    await assert.rejects(s.delete('missing'), { code: 'NOT_FOUND' })
    await s.put('k', Buffer.alloc(10))
    await assert.rejects(s.read('k', 11, 1), { code: 'INVALID_ARGUMENT' })
    await assert.rejects(s.put('', Buffer.from('x')), { code: 'INVALID_ARGUMENT' })
    await assert.rejects(s.put('k'.repeat(2000), Buffer.from('x')), { code: 'TOO_LARGE' })
    await assert.rejects(s.beginUpload('huge', 2 ** 40), { code: 'TOO_LARGE' })
    await assert.rejects(Store.open(path), { code: 'LOCKED' })
    await assert.rejects(s.read('k', -1, 1), { code: 'INVALID_ARGUMENT' })
    await assert.rejects(Store.open(path + '.x', { index: 'nope' }), { code: 'INVALID_ARGUMENT' })
    assert.equal(s.getSync('missing'), undefined)
  })
  const t = tempPath()
  writeFileSync(t.path, Buffer.alloc(2 * 1024 * 1024, 'x'))
  await assert.rejects(Store.open(t.path), { code: 'CORRUPT' })
  await assert.rejects(Store.open(t.path + '.missing', { create: false }), { code: 'NOT_FOUND' })
  t.cleanup()
})

// Guards invariant 7 (core/INVARIANTS.md): a user's file is never
// formatted, createNew never overwrites, readOnly never writes.
test('createNew and readOnly', async () => {
  const t = tempPath()
  const user = t.path + '.user'
  const data = Buffer.concat([Buffer.alloc(8192), randomBytes(100_000)])
  writeFileSync(user, data)
  await assert.rejects(Store.open(user), { code: 'CORRUPT' })
  await assert.rejects(Store.open(user, { createNew: true }), { code: 'INVALID_ARGUMENT' })
  assert.deepEqual(readFileSync(user), data)
  const w = await Store.open(t.path, { capacity: 8 * 1024 * 1024, createNew: true })
  await w.put('k', Buffer.alloc(5000, 'v'))
  await w.close()
  const before = readFileSync(t.path)
  await assert.rejects(Store.open(t.path, { createNew: true }), { code: 'INVALID_ARGUMENT' })
  const r1 = await Store.open(t.path, { readOnly: true })
  const r2 = Store.openSync(t.path, { readOnly: true })
  assert.deepEqual(await r1.get('k'), await r2.get('k'))
  await assert.rejects(r1.put('x', Buffer.from('y')), { code: 'UNSUPPORTED' })
  await assert.rejects(Store.open(t.path), { code: 'LOCKED' })
  await r1.close()
  await r2.close()
  assert.deepEqual(readFileSync(t.path), before)
  await assert.rejects(Store.open(t.path + '.missing', { readOnly: true }), { code: 'NOT_FOUND' })
  assert.equal(existsSync(t.path + '.missing'), false)
  t.cleanup()
})

test('a full store rejects with NO_SPACE and recovers after deletes', async () => {
  const t = tempPath()
  // A store grows as it fills; maxCapacity is what makes it full.
  const s = await Store.open(t.path, { capacity: 16 * 1024 * 1024, maxCapacity: 16 * 1024 * 1024 })
  const chunk = randomBytes(1024 * 1024)
  const stored = []
  let error
  for (let i = 0; i < 100 && !error; i++) {
    try {
      await s.put(`fill/${i}`, chunk)
      stored.push(`fill/${i}`)
    } catch (e) {
      error = e
    }
  }
  assert.equal(error?.code, 'NO_SPACE')
  for (const k of stored.slice(0, 3)) await s.delete(k)
  await s.put('after', chunk)
  assert.deepEqual(await s.get('after'), chunk)
  await s.close()
  await assert.rejects(s.get('after'), { code: 'CLOSED' })
  // Calls that answer from memory refuse a closed store too.
  assert.throws(() => s.has('after'), { code: 'CLOSED' })
  assert.throws(() => s.stats(), { code: 'CLOSED' })
  assert.throws(() => s.getSync('after'), { code: 'CLOSED' })
  t.cleanup()
})

test('many concurrent promises commit together', async () => {
  await withStore({}, async (s) => {
    const before = s.stats().commitGroups
    const values = Array.from({ length: 200 }, () => randomBytes(8000))
    await Promise.all(values.map((v, i) => s.put(`c/${i}`, v)))
    const groups = s.stats().commitGroups - before
    assert.ok(groups < 200, `200 puts issued in one tick took ${groups} groups`)
    const back = await Promise.all(values.map((_, i) => s.get(`c/${i}`)))
    back.forEach((b, i) => assert.deepEqual(b, values[i]))
  })
})

test('async calls do not block the event loop', async () => {
  await withStore({}, async (s) => {
    let ticks = 0
    const timer = setInterval(() => ticks++, 1)
    await Promise.all(Array.from({ length: 8 }, (_, i) => s.put(`big/${i}`, randomBytes(4 * 1024 * 1024))))
    clearInterval(timer)
    assert.ok(ticks > 0, 'timers ran while the puts were in flight')
  })
})

test('multipart upload in any order, concurrently', async () => {
  await withStore({}, async (s) => {
    const size = 3 * 4096 + 123
    const value = randomBytes(size)
    const up = await s.beginUpload('up', size)
    const offsets = [8192, 0, 12288, 4096]
    await Promise.all(offsets.map((o) => up.writePart(o, value.subarray(o, Math.min(o + 4096, size)))))
    assert.ok(!s.has('up'))
    const info = await up.commit()
    assert.equal(info.size, size)
    assert.deepEqual(await s.get('up'), value)
    await assert.rejects(up.commit(), { code: 'CLOSED' }) // already committed

    const free = s.stats().freeBytes
    const aborted = await s.beginUpload('aborted', 8 * 1024 * 1024)
    await aborted.abort()
    assert.equal(s.stats().freeBytes, free)
    const bad = await s.beginUpload('bad', 10_000)
    await assert.rejects(bad.writePart(1, Buffer.from('x')), { code: 'INVALID_ARGUMENT' })
    await assert.rejects(bad.commit(), { code: 'INVALID_ARGUMENT' })
  })
})

test('list pages through an ordered index', async () => {
  await withStore({ index: 'btree' }, async (s) => {
    await Promise.all(Array.from({ length: 2500 }, (_, i) => s.put(`${i % 2 ? 'vid' : 'img'}/${String(i).padStart(5, '0')}`, Buffer.from('x'))))
    const keys = []
    for await (const k of s.list('img/')) keys.push(k.toString())
    assert.equal(keys.length, 1250)
    assert.deepEqual(keys, [...keys].sort())
    let all = 0
    for await (const _ of s.list()) all++
    assert.equal(all, 2500)
  })
})

test('list works on a store made with default options (hash index), in byte order, page after page', async () => {
  await withStore({}, async (s) => {
    assert.equal(s.stats().index, 'hash')
    const names = Array.from({ length: 2500 }, (_, i) => `${i % 2 ? 'vid' : 'img'}/${String(i).padStart(5, '0')}`)
    await Promise.all([...names].reverse().map((k) => s.put(k, Buffer.from('x'))))
    const imgs = names.filter((k) => k.startsWith('img/'))
    const keys = []
    for await (const k of s.list('img/')) keys.push(k.toString())
    assert.deepEqual(keys, imgs)
    const listed = async (prefix) => {
      const out = []
      for await (const k of s.list(prefix)) out.push(k.toString())
      return out
    }
    assert.deepEqual(await listed('vid/0249'), ['vid/02491', 'vid/02493', 'vid/02495', 'vid/02497', 'vid/02499'])
    assert.deepEqual(await listed('none/'), [])
    // Past the first page (1024 keys), one listing goes on from its
    // snapshot: a key deleted before it is reached is skipped, every other
    // key comes once, in order.
    const seen = []
    for await (const k of s.list()) {
      seen.push(k.toString())
      if (seen.length === 10) {
        await s.delete('vid/02001')
        await s.put('zzz', Buffer.from('new'))
      }
    }
    const old = seen.filter((k) => k !== 'zzz')
    assert.deepEqual(old, [...names].sort().filter((k) => k !== 'vid/02001'))
  })
})

test('sync twins and reopen', async () => {
  const t = tempPath()
  const s = Store.openSync(t.path, { capacity: 32 * 1024 * 1024, index: 'fst' })
  const values = Array.from({ length: 100 }, (_, i) => randomBytes((i * 997) % 30_000))
  values.forEach((v, i) => s.putSync(`k${i}`, v))
  assert.deepEqual(s.getSync('k5'), values[5])
  assert.deepEqual(s.readSync('k5', 1, 3), values[5].subarray(1, 4))
  assert.equal(s.statSync('k5').size, values[5].length)
  s.deleteSync('k7')
  s.syncSync()
  s.closeSync()
  const r = await Store.open(t.path)
  assert.equal(r.stats().objects, 99)
  for (let i = 0; i < 100; i++) {
    if (i === 7) assert.ok(!r.has('k7'))
    else assert.deepEqual(await r.get(`k${i}`), values[i])
  }
  await r.sync()
  await r.close()
  t.cleanup()
})

test('damaged bytes are refused with CORRUPT, never served', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'blobcask-node-'))
  const path = join(dir, 'store.blobcask')
  try {
    const value = randomBytes(200_000)
    let s = await Store.open(path, { capacity: 16 << 20 })
    await s.put('k', value)
    await s.close()
    const raw = readFileSync(path)
    const at = raw.indexOf(value.subarray(100_000, 100_064))
    assert.ok(at >= 0)
    raw[at] ^= 1
    writeFileSync(path, raw)
    s = await Store.open(path)
    assert.equal(s.stats().recovery.clean, true)
    await assert.rejects(s.get('k'), (e) => e.code === 'CORRUPT' && /offset 98304/.test(e.message))
    await assert.rejects(s.read('k', 100_000, 10), { code: 'CORRUPT' })
    assert.throws(() => s.getSync('k'), { code: 'CORRUPT' })
    assert.deepEqual(await s.read('k', 0, 100), value.subarray(0, 100))
    await s.close()
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('writePart checks the client CRC32C before writing', async () => {
  await withStore({}, async (s) => {
    assert.equal(crc32c(Buffer.from('123456789')), 0xe3069283)
    const part = randomBytes(4096)
    const up = await s.beginUpload('u', 8192)
    await assert.rejects(up.writePart(0, part, (crc32c(part) ^ 1) >>> 0), { code: 'INVALID_ARGUMENT' })
    await assert.rejects(up.writePart(0, part, -1), { code: 'INVALID_ARGUMENT' })
    await up.writePart(0, part, crc32c(part))
    await up.writePart(4096, part)
    await up.commit()
    assert.deepEqual(await s.get('u'), Buffer.concat([part, part]))
  })
})

test('conditional puts: create only, or replace one version', async () => {
  await withStore({}, async (s) => {
    const first = await s.put('k', Buffer.from('one'), { ifAbsent: true })
    await assert.rejects(s.put('k', Buffer.from('two'), { ifAbsent: true }), { code: 'ALREADY_EXISTS' })
    assert.throws(() => s.putSync('k', Buffer.from('two'), { ifVersion: first.version + 1 }), {
      code: 'VERSION_MISMATCH',
    })
    assert.deepEqual(s.getSync('k'), Buffer.from('one'))
    const second = s.putSync('k', Buffer.from('two'), { ifVersion: first.version })
    assert.ok(second.version > first.version)
    await assert.rejects(s.put('missing', Buffer.from('x'), { ifVersion: 1n }), { code: 'VERSION_MISMATCH' })
    await assert.rejects(s.put('missing', Buffer.from('x'), { ifVersion: 1 }), { code: 'VERSION_MISMATCH' })
    assert.equal(s.has('missing'), false)
    // ifVersion takes the version as a number or as a bigint.
    const third = await s.put('k', Buffer.from('three'), { ifVersion: BigInt(second.version) })
    const fourth = s.putSync('k', Buffer.from('two'), { ifVersion: third.version })
    // Wrong conditions are refused, never coerced.
    const bad = [
      { ifVersion: -1n },
      { ifVersion: 1n << 64n },
      { ifVersion: -1 },
      { ifVersion: 1.5 },
      { ifVersion: 2 ** 53 },
      { ifVersion: NaN },
      { ifVersion: Infinity },
      { ifVersion: String(fourth.version) },
      { ifAbsent: true, ifVersion: fourth.version },
      { ifAbsent: 'yes' },
    ]
    for (const c of bad) {
      assert.throws(() => s.putSync('k', Buffer.from('x'), c), { code: 'INVALID_ARGUMENT' }, String(c.ifVersion))
      await assert.rejects(s.put('k', Buffer.from('x'), c), { code: 'INVALID_ARGUMENT' }, String(c.ifVersion))
    }
    assert.deepEqual(s.getSync('k'), Buffer.from('two'))
    // Racing creates: exactly one wins.
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) => s.put('race', Buffer.alloc(5000, i), { ifAbsent: true })),
    )
    assert.equal(results.filter((r) => r.status === 'fulfilled').length, 1)
    for (const r of results.filter((r) => r.status === 'rejected')) assert.equal(r.reason.code, 'ALREADY_EXISTS')
  })
})

test('ObjectInfo, stats and reports survive JSON: versions are numbers', async () => {
  await withStore({}, async (s, path) => {
    const info = await s.put('k', Buffer.from('v'), { ttl: 60_000 })
    const back = JSON.parse(JSON.stringify(info))
    assert.deepEqual(back, info)
    assert.deepEqual(JSON.parse(JSON.stringify(s.statSync('k'))), s.statSync('k'))
    // A version read back from JSON is a valid ifVersion.
    const next = await s.put('k', Buffer.from('w'), { ifVersion: back.version })
    assert.ok(next.version > back.version)
    assert.ok(Number.isSafeInteger(next.version))
    for (const report of [s.stats(), await s.bulkLoad([['b', Buffer.from('x')]]), await s.compact(), await s.backup(path + '.bak')]) {
      assert.deepEqual(JSON.parse(JSON.stringify(report)), report)
    }
    rmSync(path + '.bak', { force: true })
  })
})

test('arguments of the wrong type reject with INVALID_ARGUMENT, never coerced', async () => {
  await withStore({}, async (s) => {
    const buf = Buffer.from('v')
    const calls = [
      () => s.put(5, buf),
      () => s.put('k', 'a\udc00 string'),
      () => s.put('k', new Uint16Array(1)),
      () => s.put('k', 42),
      () => s.put('k', null),
      () => s.read('k', 'x'),
      () => s.put('k', buf, { ifVersion: '5' }),
    ]
    for (const c of calls) await assert.rejects(c(), { code: 'INVALID_ARGUMENT' }, String(c))
    assert.throws(() => s.putSync('k', [1, 2]), { code: 'INVALID_ARGUMENT' })
    assert.throws(() => s.getSync({}), { code: 'INVALID_ARGUMENT' })
    assert.equal(s.has('k'), false, 'a refused put stored something')
  })
  const t = tempPath()
  await assert.rejects(Store.open(t.path, { cacheBytes: '64' }), { code: 'INVALID_ARGUMENT' })
  await assert.rejects(Store.open(t.path, { readOnly: 'yes' }), { code: 'INVALID_ARGUMENT' })
  t.cleanup()
})
