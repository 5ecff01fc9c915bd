// Uploads in progress: store.listUploads(), store.abortUpload(id), upload.id.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setImmediate as tick } from 'node:timers/promises'

import { Store } from '../lib.mjs'

import { tempPath, withStore } from './helpers.mjs'

const ALIGN = 4096

test('listUploads shows key, size and progress', async () => {
  await withStore({}, async (s) => {
    assert.deepEqual(s.listUploads(), [])
    const before = Date.now()
    const size = 3 * ALIGN + 123
    const value = Buffer.alloc(size, 7)
    const up = await s.beginUpload('videos/a.mp4', size)
    const after = Date.now()
    assert.equal(typeof up.id, 'number')
    assert.ok(Number.isSafeInteger(up.id) && up.id > 0)

    const [info] = s.listUploads()
    assert.equal(info.id, up.id)
    assert.ok(Buffer.isBuffer(info.key))
    assert.equal(info.key.toString(), 'videos/a.mp4')
    assert.equal(info.size, size)
    assert.equal(info.written, 0)
    assert.equal(typeof info.started, 'number')
    assert.ok(info.started >= before - 1000 && info.started <= after + 1000, 'started is in ms since the epoch')

    // `written` counts the parts written, in whatever order they come.
    await up.writePart(2 * ALIGN, value.subarray(2 * ALIGN, 3 * ALIGN))
    assert.equal(s.listUploads()[0].written, ALIGN)
    await up.writePart(0, value.subarray(0, ALIGN))
    await up.writePart(ALIGN, value.subarray(ALIGN, 2 * ALIGN))
    assert.equal(s.listUploads()[0].written, 3 * ALIGN)
    await up.writePart(3 * ALIGN, value.subarray(3 * ALIGN)) // the short last part
    assert.equal(s.listUploads()[0].written, size)
    assert.equal(info.written, 0, 'a listing is a snapshot')

    await up.commit()
    assert.deepEqual(s.listUploads(), [])
    assert.deepEqual(await s.get('videos/a.mp4'), value)
    assert.equal(up.id, info.id, 'id is still readable once committed')
  })
})

test('listUploads is oldest first; committed, aborted and dropped uploads leave it', async () => {
  await withStore({}, async (s) => {
    const ups = []
    for (let i = 0; i < 4; i++) ups.push(await s.beginUpload(`u${i}`, 2 * ALIGN))
    const ids = ups.map((u) => u.id)
    assert.equal(new Set(ids).size, 4)
    assert.deepEqual(s.listUploads().map((i) => i.id), ids)
    assert.deepEqual(s.listUploads().map((i) => i.key.toString()), ['u0', 'u1', 'u2', 'u3'])

    await ups[0].writePart(0, Buffer.alloc(2 * ALIGN, 1))
    await ups[0].commit() // committed
    await ups[1].abort() // aborted through its handle
    s.abortUpload(ids[2]) // aborted from the store
    assert.deepEqual(s.listUploads().map((i) => i.id), [ids[3]])
    for (const id of ids.slice(0, 3)) assert.throws(() => s.abortUpload(id), { code: 'NOT_FOUND' })

    // Dropped: once the JavaScript Upload is collected, it leaves the list.
    ups.length = 0
    for (let i = 0; i < 50 && s.listUploads().length > 0; i++) {
      global.gc()
      await tick()
    }
    assert.deepEqual(s.listUploads(), [])
    assert.throws(() => s.abortUpload(ids[3]), { code: 'NOT_FOUND' })
  })
})

test('abortUpload from the store closes the handle and frees its space', async () => {
  await withStore({}, async (s) => {
    const free = s.stats().freeBytes
    const up = await s.beginUpload('big', 8 * 1024 * 1024)
    await up.writePart(0, Buffer.alloc(ALIGN))
    assert.ok(s.stats().freeBytes < free)

    assert.equal(s.abortUpload(up.id), undefined)
    assert.equal(s.stats().freeBytes, free)
    assert.deepEqual(s.listUploads(), [])
    await assert.rejects(up.writePart(ALIGN, Buffer.alloc(ALIGN)), (e) => e.code === 'CLOSED' && /aborted/.test(e.message))
    await assert.rejects(up.commit(), { code: 'CLOSED' })
    assert.ok(!s.has('big'))
    assert.throws(() => s.abortUpload(up.id), { code: 'NOT_FOUND' })
    await up.abort() // the handle's own abort is then a no-op
    assert.equal(s.stats().freeBytes, free)
  })
})

test('abortUpload while parts are being written', async () => {
  await withStore({}, async (s) => {
    const free = s.stats().freeBytes
    const size = 32 * 1024 * 1024
    const part = 1024 * 1024
    const up = await s.beginUpload('racing', size)
    const data = Buffer.alloc(part, 7)
    const writes = []
    for (let off = 0; off < size; off += part) writes.push(up.writePart(off, data))
    // Abort once a part has landed, while others are in flight.
    await writes[0]
    s.abortUpload(up.id)
    const outcomes = await Promise.allSettled(writes)
    for (const o of outcomes) {
      if (o.status === 'rejected') assert.equal(o.reason.code, 'CLOSED')
    }
    assert.ok(outcomes.some((o) => o.status === 'fulfilled'))
    await assert.rejects(up.commit(), { code: 'CLOSED' })
    assert.equal(s.stats().freeBytes, free, 'all the space is back once the parts in flight are done')
    assert.ok(!s.has('racing'))
  })
})

test('abortUpload arguments', async () => {
  await withStore({}, async (s) => {
    assert.throws(() => s.abortUpload(12345), { code: 'NOT_FOUND' })
    assert.throws(() => s.abortUpload(0), { code: 'NOT_FOUND' })
    const up = await s.beginUpload('k', 5000)
    for (const bad of [-1, 1.5, NaN, Infinity, 2 ** 64]) {
      assert.throws(() => s.abortUpload(bad), { code: 'INVALID_ARGUMENT' }, String(bad))
    }
    for (const bad of ['1', null, undefined, {}, 1n]) {
      assert.throws(() => s.abortUpload(bad), { code: 'INVALID_ARGUMENT' }, String(bad))
    }
    assert.deepEqual(s.listUploads().map((i) => i.id), [up.id], 'untouched')
    await up.abort()
  })
})

test('a closed store refuses listUploads and abortUpload', async () => {
  const t = tempPath()
  try {
    const s = await Store.open(t.path, { capacity: 16 * 1024 * 1024 })
    const up = await s.beginUpload('k', 5000)
    await s.close()
    assert.throws(() => s.listUploads(), { code: 'CLOSED' })
    assert.throws(() => s.abortUpload(up.id), { code: 'CLOSED' })
    await assert.rejects(up.writePart(0, Buffer.alloc(5000)), { code: 'CLOSED' })
  } finally {
    t.cleanup()
  }
})

test('uploads are gone at reopen, with their space', async () => {
  const t = tempPath()
  try {
    let s = await Store.open(t.path, { capacity: 16 * 1024 * 1024 })
    const free = s.stats().freeBytes
    const up = await s.beginUpload('unfinished', 4 * 1024 * 1024)
    await up.writePart(0, Buffer.alloc(ALIGN, 1))
    assert.ok(s.stats().freeBytes < free)
    await s.close() // with the upload still open
    s = await Store.open(t.path)
    assert.deepEqual(s.listUploads(), [])
    assert.ok(!s.has('unfinished'))
    assert.equal(s.stats().freeBytes, free)
    await s.close()
  } finally {
    t.cleanup()
  }
})

test('an upload commits with conditions and a ttl, as put does', async () => {
  await withStore({}, async (s) => {
    const value = Buffer.alloc(ALIGN + 5, 3)
    const write = async (up) => {
      await up.writePart(0, value.subarray(0, ALIGN))
      await up.writePart(ALIGN, value.subarray(ALIGN))
    }
    // A ttl: the object expires that long after its commit.
    let up = await s.beginUpload('u', value.length)
    await write(up)
    // A bad option rejects and leaves the upload as it was.
    for (const bad of [{ ttl: -1 }, { ttl: 'x' }, { ifAbsent: true, ifVersion: 1 }, 60_000, 'x', true, [], { tll: 5 }]) {
      await assert.rejects(up.commit(bad), { code: 'INVALID_ARGUMENT' }, JSON.stringify(bad))
    }
    assert.equal(s.listUploads().length, 1, 'a refused option ended the upload')
    const info = await up.commit({ ttl: 60_000 })
    assert.ok(Math.abs(info.expires - (info.created + 60_000)) < 2, `${info.expires} ${info.created}`)
    assert.deepEqual(await s.get('u'), value)
    // ifAbsent over an existing key: ALREADY_EXISTS, nothing changes, the upload ends.
    up = await s.beginUpload('u', value.length)
    await write(up)
    await assert.rejects(up.commit({ ifAbsent: true }), { code: 'ALREADY_EXISTS' })
    assert.deepEqual(s.listUploads(), [])
    assert.equal((await s.stat('u')).version, info.version)
    // ifVersion of the current version replaces it (ttl null: none).
    up = await s.beginUpload('u', value.length)
    await write(up)
    const next = await up.commit({ ifVersion: info.version, ttl: null })
    assert.ok(next.version > info.version)
    assert.equal(next.expires, null)
  })
})

test('a commit racing a part never commits a torn object', async () => {
  await withStore({}, async (s) => {
    const size = 16 << 20
    const head = Buffer.alloc(4096, 1)
    const tail = Buffer.alloc(size - 4096, 2)
    const whole = Buffer.concat([head, tail])
    const seen = { committed: 0, stillWritten: 0, neverWritten: 0 }
    for (let round = 0; round < 4; round++) {
      const key = `race${round}`
      const up = await s.beginUpload(key, size)
      await up.writePart(0, head)
      // Settles with the part's error rather than rejecting: the part may
      // fail while the commit is awaited, before anything else could
      // handle its rejection.
      const part = up.writePart(4096, tail).then(() => null, (e) => e)
      const outcome = await up.commit().then(
        (info) => info,
        (e) => e,
      )
      if (!(outcome instanceof Error)) {
        // The part had landed before the commit looked: whole.
        seen.committed++
        assert.equal(await part, null)
        assert.deepEqual(await s.get(key), whole)
      } else if (/still being written/.test(outcome.message)) {
        // The upload is as it was: once the part is in, it commits whole.
        assert.equal(outcome.code, 'INVALID_ARGUMENT')
        seen.stillWritten++
        assert.equal(await part, null)
        assert.equal((await up.commit()).size, size)
        assert.deepEqual(await s.get(key), whole)
      } else {
        // The commit came before the part started: bytes never written.
        assert.equal(outcome.code, 'INVALID_ARGUMENT')
        assert.match(outcome.message, /never written/)
        seen.neverWritten++
        const failed = await part
        if (failed !== null) assert.equal(failed.code, 'CLOSED')
        assert.equal(s.has(key), false)
        continue
      }
      await assert.rejects(up.commit(), (e) => e.code === 'CLOSED' && /already committed/.test(e.message))
      await assert.rejects(up.writePart(0, head), { code: 'CLOSED' })
    }
    console.log(`# commit racing a part: ${JSON.stringify(seen)}`)
  })
})
