// Promise calls completed on Node's own event loop (the store's EventLoop
// watched by libuv): many in flight, errors, close with calls pending, an
// idle store that lets Node exit, GC and worker teardown (node --test).
// Each runs under both I/O engines: io_uring (the ring's eventfd and the
// wake descriptor are watched) and portable (the wake descriptor only).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import { setImmediate as tick } from 'node:timers/promises'

import { Store } from '../lib.mjs'

import { tempPath, withStore } from './helpers.mjs'

const ENGINES = ['io_uring', 'portable']
const LIB = fileURLToPath(new URL('../lib.js', import.meta.url))
// Sizes across the inline threshold, the copy threshold (16 KiB) and the
// size above which calls keep their worker path (1 MiB).
const SIZES = [0, 10, 700, 5000, 16 << 10, 100_000, 1 << 20, (1 << 20) + 1, 3 << 20]
const value = (i) => randomBytes(SIZES[i % SIZES.length])

for (const ioEngine of ENGINES) {
  test(`${ioEngine}: 64 puts, gets, reads, stats and deletes in flight at once`, async () => {
    await withStore({ ioEngine, capacity: 256 << 20 }, async (s) => {
      assert.equal(s.stats().ioEngine, ioEngine === 'io_uring' ? 'io_uring' : 'portable')
      const values = Array.from({ length: 64 }, (_, i) => value(i))
      const infos = await Promise.all(values.map((v, i) => s.put(`k${i}`, v)))
      infos.forEach((info, i) => assert.equal(info.size, values[i].length))
      const gets = await Promise.all(values.map((_, i) => s.get(`k${i}`)))
      gets.forEach((b, i) => assert.ok(b.equals(values[i]), `get k${i}`))
      const at = (i) => Math.min(3, values[i].length)
      const reads = await Promise.all(values.map((_, i) => s.read(`k${i}`, at(i), 70_000)))
      reads.forEach((b, i) => assert.ok(b.equals(values[i].subarray(at(i), at(i) + 70_000)), `read k${i}`))
      const stats = await Promise.all(values.map((_, i) => s.stat(`k${i}`)))
      stats.forEach((st, i) => assert.equal(st.version, infos[i].version))
      // Mixed: overwrites, deletes and reads of other keys, all at once.
      const mixed = await Promise.all(
        values.map((v, i) => (i % 3 === 0 ? s.delete(`k${i}`) : i % 3 === 1 ? s.put(`k${i}`, v.subarray(1)) : s.get(`k${i}`))),
      )
      mixed.forEach((r, i) => {
        if (i % 3 === 0) assert.equal(r, undefined)
        else if (i % 3 === 1) assert.equal(r.size, Math.max(values[i].length - 1, 0))
        else assert.ok(r.equals(values[i]))
      })
      for (let i = 0; i < 64; i++) assert.equal(s.has(`k${i}`), i % 3 !== 0)
    })
  })

  test(`${ioEngine}: errors reject with their code`, async () => {
    await withStore({ ioEngine }, async (s) => {
      await s.put('k', Buffer.alloc(10))
      await s.put('big', Buffer.alloc(2 << 20))
      const cases = [
        [s.readInto('missing', Buffer.alloc(1)), 'NOT_FOUND'],
        [s.read('missing', 0, 1), 'NOT_FOUND'],
        [s.stat('missing'), 'NOT_FOUND'],
        [s.delete('missing'), 'NOT_FOUND'],
        [s.read('k', 11, 1), 'INVALID_ARGUMENT'],
        [s.read('big', (2 << 20) + 1), 'INVALID_ARGUMENT'],
        [s.put('', Buffer.from('x')), 'INVALID_ARGUMENT'],
        [s.get(''), 'INVALID_ARGUMENT'],
        [s.put('k'.repeat(2000), Buffer.from('x')), 'TOO_LARGE'],
        [s.put('k'.repeat(2000), Buffer.alloc(2 << 20)), 'TOO_LARGE'],
        [s.read('k', -1, 1), 'INVALID_ARGUMENT'],
      ]
      const settled = await Promise.allSettled(cases.map(([p]) => p))
      settled.forEach((r, i) => {
        assert.equal(r.status, 'rejected', `case ${i}`)
        assert.ok(r.reason instanceof Error)
        assert.equal(r.reason.code, cases[i][1], `case ${i}: ${r.reason.message}`)
      })
      assert.ok((await s.get('k')).equals(Buffer.alloc(10)), 'the store still works')
    })
  })

  // Calls on the loop (up to 1 MiB) were submitted when they returned, so
  // they complete; larger ones start on a worker and may find the store
  // already closed (CLOSED), as every call could before the loop.
  test(`${ioEngine}: close() with calls pending settles them all; later calls reject with CLOSED`, async () => {
    const t = tempPath()
    const s = await Store.open(t.path, { ioEngine, capacity: 128 << 20 })
    const values = Array.from({ length: 64 }, (_, i) => value(i))
    const onLoop = (i) => values[i].length <= 1 << 20
    await Promise.all(values.slice(0, 32).map((v, i) => s.put(`k${i}`, v)))
    const gets = values.slice(0, 32).map((_, i) => s.get(`k${i}`))
    const puts = values.slice(32).map((v, i) => s.put(`k${32 + i}`, v))
    const closed = s.close()
    const after = Promise.allSettled([s.get('k0'), s.read('k0', 0, 1), s.put('x', Buffer.from('y')), s.stat('k0'), s.delete('k0')])
    const all = Promise.allSettled([...gets, ...puts])
    await closed
    const settled = await all
    settled.forEach((r, i) => {
      if (r.status === 'rejected') {
        assert.ok(!onLoop(i), `call ${i} (${values[i].length} bytes) on the loop: ${r.reason.message}`)
        assert.equal(r.reason.code, 'CLOSED')
      } else if (i < 32) {
        assert.ok(r.value.equals(values[i]), `get k${i}`)
      } else {
        assert.equal(r.value.size, values[i].length)
      }
    })
    for (const r of await after) assert.equal(r.reason?.code, 'CLOSED')
    for (const p of [s.get('k0'), s.put('x', Buffer.from('y')), s.stat('k0'), s.delete('k0'), s.read('k0', 0, 1)]) {
      await assert.rejects(p, { code: 'CLOSED' })
    }
    // Acknowledged means durable.
    const r = await Store.open(t.path, { ioEngine })
    for (let i = 0; i < 64; i++) {
      if (i < 32 || settled[i].status === 'fulfilled') assert.ok((await r.get(`k${i}`)).equals(values[i]), `reopened k${i}`)
    }
    await r.close()
    t.cleanup()
  })

  test(`${ioEngine}: blocking calls while promise calls are pending do not wait on each other`, async () => {
    const t = tempPath()
    const s = await Store.open(t.path, { ioEngine, capacity: 128 << 20 })
    const a = Array.from({ length: 32 }, (_, i) => s.put(`a${i}`, value(i)))
    // Would join a commit group that a pending put leads.
    s.putSync('sync', Buffer.alloc(5000, 1))
    s.deleteSync('sync')
    s.syncSync()
    const b = Array.from({ length: 32 }, (_, i) => s.put(`b${i}`, value(i)))
    const g = s.get('a0')
    s.closeSync()
    for (const r of await Promise.allSettled([...a, ...b, g])) assert.equal(r.status, 'fulfilled', r.reason?.message)
    await assert.rejects(s.get('a0'), { code: 'CLOSED' })
    assert.throws(() => s.getSync('a0'), { code: 'CLOSED' })
    t.cleanup()
  })

  test(`${ioEngine}: an idle open store lets node exit; a pending call keeps it running until it settles`, () => {
    const t = tempPath()
    const script = `
      const { Store } = require(${JSON.stringify(LIB)})
      Store.open(${JSON.stringify(t.path)}, { ioEngine: '${ioEngine}', capacity: 16 << 20 }).then(async (s) => {
        await s.put('k', Buffer.alloc(100_000, 7))
        const b = await s.get('k')
        console.log('got', b.length)
        // Not awaited, nothing else scheduled: only the call keeps node up.
        s.get('k').then((b) => console.log('later', b.length))
      })`
    const started = Date.now()
    const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 10_000 })
    assert.equal(child.error, undefined, `node did not exit on its own: ${child.error}`)
    assert.equal(child.status, 0, child.stderr)
    assert.equal(child.stdout, 'got 100000\nlater 100000\n')
    assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`)
    t.cleanup()
  })

  test(`${ioEngine}: a store collected with calls pending settles them`, { skip: !global.gc }, async () => {
    const t = tempPath()
    const v = randomBytes(50_000)
    let pending
    {
      const s = await Store.open(t.path, { ioEngine, capacity: 16 << 20 })
      await s.put('k', v)
      pending = Array.from({ length: 16 }, () => s.get('k'))
      pending.push(s.put('k2', v))
    }
    for (let i = 0; i < 3; i++) {
      global.gc()
      await tick()
    }
    for (const b of (await Promise.all(pending)).slice(0, 16)) assert.ok(b.equals(v))
    // Collected at last: the lock is released then, not before; wait for it.
    let reopened
    for (let i = 0; i < 100 && !reopened; i++) {
      global.gc()
      await tick()
      reopened = await Store.open(t.path).catch((e) => (e.code === 'LOCKED' ? undefined : Promise.reject(e)))
    }
    if (reopened) {
      assert.ok((await reopened.get('k2')).equals(v))
      await reopened.close()
    }
    t.cleanup()
  })

  test(`${ioEngine}: a worker thread that ends with an open store and calls pending exits cleanly`, async () => {
    const t = tempPath()
    const code = `
      const { parentPort } = require('node:worker_threads')
      const { Store } = require(${JSON.stringify(LIB)})
      ;(async () => {
        const s = await Store.open(${JSON.stringify(t.path)}, { ioEngine: '${ioEngine}', capacity: 16 << 20 })
        await s.put('k', Buffer.alloc(50_000, 3))
        parentPort.postMessage((await s.get('k')).length)
        for (let i = 0; i < 16; i++) s.get('k')
        process.exit(0)
      })()`
    const w = new Worker(code, { eval: true })
    const got = await new Promise((resolve, reject) => {
      w.once('message', resolve)
      w.once('error', reject)
    })
    assert.equal(got, 50_000)
    assert.equal(await new Promise((resolve) => w.once('exit', resolve)), 0)
    t.cleanup()
  })
}
