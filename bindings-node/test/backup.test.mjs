// Store.backup / backupSync: a copy that opens with every object.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { randomBytes } from 'node:crypto'

import { Store } from '../lib.mjs'

import { tempPath, withStore } from './helpers.mjs'

/** Inline, one-block, multi-block, multi-MiB and empty values; one key
 * deleted and one overwritten. Returns what the store holds. */
async function fill(s) {
  const values = new Map()
  for (let i = 0; i < 60; i++) values.set(`obj/${i}`, randomBytes((i * 7919) % 70_000))
  values.set('tiny', Buffer.from('abc'))
  values.set('empty', Buffer.alloc(0))
  values.set('large', randomBytes(5 * 1024 * 1024 + 123))
  await Promise.all([...values].map(([k, v]) => s.put(k, v)))
  await s.delete('obj/3')
  values.delete('obj/3')
  values.set('obj/4', Buffer.from('replaced'))
  await s.put('obj/4', values.get('obj/4'))
  return values
}

const total = (values) => [...values.values()].reduce((n, v) => n + v.length, 0)

/** The store at `dest` opens and holds exactly `values`. */
async function assertHolds(dest, values) {
  const copy = await Store.open(dest)
  try {
    assert.equal(copy.stats().objects, values.size)
    assert.equal(copy.stats().logicalBytes, total(values))
    for (const [k, v] of values) assert.deepEqual(await copy.get(k), v, k)
    assert.equal(copy.has('obj/3'), false)
  } finally {
    await copy.close()
  }
}

test('backup makes a copy that opens with every object', async () => {
  await withStore({}, async (s, path) => {
    const values = await fill(s)
    const dest = join(dirname(path), 'copy.blobcask')
    const report = await s.backup(dest)
    assert.deepEqual(Object.keys(report).sort(), ['bytes', 'bytesPerSec', 'elapsedMs', 'objects', 'path'])
    assert.equal(report.path, dest)
    assert.equal(report.objects, values.size)
    assert.equal(report.bytes, total(values))
    assert.equal(typeof report.elapsedMs, 'number')
    assert.ok(report.elapsedMs > 0 && report.elapsedMs < 600_000, `elapsedMs ${report.elapsedMs}`)
    // The source goes on; a write after the backup is not in the copy.
    await s.put('after', Buffer.from('later'))
    assert.deepEqual(await s.get('obj/0'), values.get('obj/0'))
    await assertHolds(dest, values)
    assert.deepEqual(readdirSync(dirname(path)).sort(), ['copy.blobcask', 'store.blobcask'])
  })
})

test('backupSync makes the same copy', async () => {
  await withStore({}, async (s, path) => {
    const values = await fill(s)
    const dest = join(dirname(path), 'copy-sync.blobcask')
    const report = s.backupSync(dest)
    assert.equal(report.path, dest)
    assert.equal(report.objects, values.size)
    assert.equal(report.bytes, total(values))
    assert.ok(report.elapsedMs > 0)
    await assertHolds(dest, values)
  })
})

test('an existing destination is refused and left untouched', async () => {
  await withStore({}, async (s, path) => {
    await fill(s)
    const dir = dirname(path)
    const taken = join(dir, 'precious.txt')
    writeFileSync(taken, 'do not touch')
    await assert.rejects(s.backup(taken), { code: 'ALREADY_EXISTS' })
    assert.throws(() => s.backupSync(taken), { code: 'ALREADY_EXISTS' })
    assert.equal(readFileSync(taken, 'utf8'), 'do not touch')
    // The store's own file and an earlier copy are never replaced either.
    const size = readFileSync(path).length
    await assert.rejects(s.backup(path), { code: 'ALREADY_EXISTS' })
    assert.equal(readFileSync(path).length, size)
    const copy = join(dir, 'copy')
    await s.backup(copy)
    const before = readFileSync(copy)
    await s.put('new', Buffer.from('x'))
    await assert.rejects(s.backup(copy), { code: 'ALREADY_EXISTS' })
    assert.deepEqual(readFileSync(copy), before)
    // A dangling symlink is in the way too.
    symlinkSync(join(dir, 'nowhere'), join(dir, 'link'))
    await assert.rejects(s.backup(join(dir, 'link')), { code: 'ALREADY_EXISTS' })
    assert.equal(existsSync(join(dir, 'nowhere')), false)
  })
})

test('other bad destinations', async () => {
  await withStore({}, async (s, path) => {
    const missing = join(dirname(path), 'no-such-dir', 'copy')
    await assert.rejects(s.backup(missing), { code: 'NOT_FOUND' })
    assert.throws(() => s.backupSync(missing), { code: 'NOT_FOUND' })
    assert.equal(existsSync(dirname(missing)), false)
    await assert.rejects(s.backup('/'), { code: 'INVALID_ARGUMENT' })
    assert.throws(() => s.backupSync('/'), { code: 'INVALID_ARGUMENT' })
  })
})

test('a destination of the wrong type is INVALID_ARGUMENT, never coerced', async () => {
  await withStore({}, async (s, path) => {
    const dir = dirname(path)
    const before = readdirSync(dir).sort()
    const wrong = [42, null, undefined, {}, Buffer.from(join(dir, 'b')), new URL(`file://${dir}/u`), [join(dir, 'a')]]
    for (const w of wrong) {
      await assert.rejects(s.backup(w), { code: 'INVALID_ARGUMENT' }, String(w))
      assert.throws(() => s.backupSync(w), { code: 'INVALID_ARGUMENT' }, String(w))
    }
    assert.deepEqual(readdirSync(dir).sort(), before, 'a refused call wrote something')
  })
})

test('backup after close rejects with CLOSED', async () => {
  const t = tempPath()
  const s = await Store.open(t.path, { capacity: 16 * 1024 * 1024 })
  await s.put('k', Buffer.from('v'))
  const closing = s.close()
  // Refused at once, even before the close has finished.
  await assert.rejects(s.backup(t.path + '.early'), { code: 'CLOSED' })
  await closing
  await assert.rejects(s.backup(t.path + '.copy'), { code: 'CLOSED' })
  assert.throws(() => s.backupSync(t.path + '.copy'), { code: 'CLOSED' })
  assert.equal(existsSync(t.path + '.early'), false)
  assert.equal(existsSync(t.path + '.copy'), false)
  t.cleanup()
})

test('backup does not block the event loop, and other calls go on', async () => {
  await withStore({}, async (s, path) => {
    const big = Array.from({ length: 6 }, () => randomBytes(4 * 1024 * 1024))
    await Promise.all(big.map((v, i) => s.put(`big/${i}`, v)))
    let ticks = 0
    let done = false
    const spin = () => {
      ticks++
      if (!done) setImmediate(spin)
    }
    setImmediate(spin)
    const dest = join(dirname(path), 'copy')
    const [report, got] = await Promise.all([s.backup(dest), s.get('big/1')])
    done = true
    assert.ok(ticks > 5, `the event loop was blocked (${ticks} ticks)`)
    assert.deepEqual(got, big[1])
    assert.equal(report.objects, 6)
    const copy = Store.openSync(dest)
    big.forEach((v, i) => assert.deepEqual(copy.getSync(`big/${i}`), v))
    copy.closeSync()
  })
})

test('a backup of an empty store is an empty store', async () => {
  const t = tempPath()
  try {
    const s = Store.openSync(t.path, { capacity: 8 * 1024 * 1024 })
    const dest = join(dirname(t.path), 'copy')
    const report = s.backupSync(dest)
    assert.equal(report.objects, 0)
    assert.equal(report.bytes, 0)
    s.closeSync()
    const copy = Store.openSync(dest)
    assert.equal(copy.stats().objects, 0)
    copy.closeSync()
  } finally {
    t.cleanup()
  }
})
