// After close(): every call fails with CLOSED, whichever way the store was
// closed (node --test).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { join, dirname } from 'node:path'

import { BlobcaskError, Store, Upload } from '../lib.mjs'

import { tempPath } from './helpers.mjs'

/** Every Store method and how to call it; a new method must be added here. */
function storeCalls(s, dir) {
  return {
    put: () => s.put('k', Buffer.from('x')),
    get: () => s.get('k'),
    read: () => s.read('k', 0, 1),
    readInto: () => s.readInto('k', Buffer.alloc(1)),
    stat: () => s.stat('k'),
    delete: () => s.delete('k'),
    has: () => s.has('k'),
    list: async () => {
      for await (const _ of s.list('')) break
    },
    beginUpload: () => s.beginUpload('new', 10),
    bulkLoad: () => s.bulkLoad([['k', Buffer.from('x')]]),
    listUploads: () => s.listUploads(),
    abortUpload: () => s.abortUpload(0),
    stats: () => s.stats(),
    grow: () => s.grow(64 << 20),
    sync: () => s.sync(),
    backup: () => s.backup(join(dir, 'backup')),
    compact: () => s.compact(),
    putSync: () => s.putSync('k', Buffer.from('x')),
    getSync: () => s.getSync('k'),
    readSync: () => s.readSync('k', 0, 1),
    readIntoSync: () => s.readIntoSync('k', Buffer.alloc(1)),
    statSync: () => s.statSync('k'),
    deleteSync: () => s.deleteSync('k'),
    growSync: () => s.growSync(64 << 20),
    syncSync: () => s.syncSync(),
    backupSync: () => s.backupSync(join(dir, 'backup-sync')),
    compactSync: () => s.compactSync(),
    batch: () => s.batch([{ type: 'put', key: 'k', value: Buffer.from('x') }]),
    batchSync: () => s.batchSync([{ type: 'del', key: 'k' }]),
    getMany: () => s.getMany(['k']),
    getManySync: () => s.getManySync(['k']),
  }
}

/** Methods that are not calls on an open store. */
const NOT_CALLS = new Set(['constructor', 'close', 'closeSync'])

/** Methods that throw; the others return a Promise that rejects. */
const SYNC = new Set(['has', 'listUploads', 'abortUpload', 'stats', 'putSync', 'getSync', 'readSync', 'readIntoSync', 'statSync', 'deleteSync', 'growSync', 'syncSync', 'backupSync', 'compactSync', 'batchSync', 'getManySync'])

test('the table below covers every Store method', () => {
  const listed = new Set(Object.keys(storeCalls({}, '/nowhere')))
  for (const name of Object.getOwnPropertyNames(Store.prototype)) {
    if (!NOT_CALLS.has(name)) assert.ok(listed.has(name), `Store.${name} is not tested after close`)
  }
  for (const name of Object.getOwnPropertyNames(Upload.prototype)) {
    assert.ok(['constructor', 'id', 'writePart', 'commit', 'abort'].includes(name), `Upload.${name} is not tested after close`)
  }
})

// 'close, not awaited': calls made while close() is still finishing must
// fail as well (sync() used to go through and resolve).
for (const how of ['close', 'closeSync', 'close, not awaited']) {
  test(`after ${how}(), every call fails with CLOSED`, async () => {
    const t = tempPath()
    const dir = dirname(t.path)
    try {
      const s = await Store.open(t.path, { capacity: 16 << 20, index: 'btree' })
      await s.put('k', Buffer.from('v'))
      const up = await s.beginUpload('u', 10)
      let closing = Promise.resolve()
      if (how === 'close') await s.close()
      else if (how === 'closeSync') s.closeSync()
      else closing = s.close()
      for (const [name, call] of Object.entries(storeCalls(s, dir))) {
        if (SYNC.has(name)) {
          assert.throws(call, (e) => e instanceof BlobcaskError && e.code === 'CLOSED', name)
        } else {
          let p
          assert.doesNotThrow(() => {
            p = call()
          }, `${name} threw instead of rejecting`)
          await assert.rejects(p, (e) => e instanceof BlobcaskError && e.code === 'CLOSED', name)
        }
      }
      await assert.rejects(up.writePart(0, Buffer.alloc(10)), { code: 'CLOSED' })
      await assert.rejects(up.commit(), { code: 'CLOSED' })
      await up.abort() // abandoning is always possible
      await closing
      // Closing again does nothing, either way.
      await s.close()
      s.closeSync()
      // The lock is released: the store opens again, unchanged.
      const again = await Store.open(t.path)
      assert.deepEqual(await again.get('k'), Buffer.from('v'))
      assert.equal(again.has('u'), false)
      await again.close()
    } finally {
      t.cleanup()
    }
  })
}

test('calls pending at close() settle, later ones fail with CLOSED', async () => {
  const t = tempPath()
  try {
    const s = await Store.open(t.path, { capacity: 16 << 20 })
    const puts = Array.from({ length: 20 }, (_, i) => s.put(`k${i}`, Buffer.alloc(5000, i)))
    const closing = s.close()
    await assert.rejects(s.put('late', Buffer.from('x')), { code: 'CLOSED' })
    await Promise.all(puts)
    await closing
    const again = await Store.open(t.path)
    for (let i = 0; i < 20; i++) assert.deepEqual(await again.get(`k${i}`), Buffer.alloc(5000, i))
    await again.close()
  } finally {
    t.cleanup()
  }
})
