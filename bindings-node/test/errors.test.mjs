// Errors: a documented `code` on every error, the OS cause, the caller's
// stack (node --test).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { constants } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { BlobcaskError, Store, crc32c } from '../lib.mjs'

import { tempPath, withStore } from './helpers.mjs'

const here = fileURLToPath(import.meta.url)

/** The codes lib.d.ts documents (`ErrorCode`): the test follows the docs. */
const DOCUMENTED = (() => {
  const dts = readFileSync(new URL('../lib.d.ts', import.meta.url), 'utf8')
  const union = /export type ErrorCode =([^;]*?)\n\n/s.exec(dts)
  assert.ok(union, 'lib.d.ts declares ErrorCode')
  return new Set([...union[1].matchAll(/'([A-Z_]+)'/g)].map((m) => m[1]))
})()

/** Asserts `e` is a BlobcaskError with a documented code (`code` if given). */
function isOurs(e, code) {
  assert.ok(e instanceof BlobcaskError, `not a BlobcaskError: ${e?.stack ?? e}`)
  assert.ok(e instanceof Error)
  assert.equal(e.name, 'BlobcaskError')
  assert.ok(DOCUMENTED.has(e.code), `undocumented code ${e.code}: ${e.message}`)
  if (code) assert.equal(e.code, code, e.message)
  assert.doesNotMatch(e.message, /^[A-Z_]+(\/\d+)?: /, 'the code prefix stays in the message')
  return true
}

test('ErrorCode lists every kind and INTERNAL', () => {
  for (const code of [
    'NOT_FOUND',
    'INVALID_ARGUMENT',
    'TOO_LARGE',
    'NO_SPACE',
    'CORRUPT',
    'IO',
    'LOCKED',
    'UNSUPPORTED',
    'CLOSED',
    'ALREADY_EXISTS',
    'VERSION_MISMATCH',
    'INTERNAL',
  ]) {
    assert.ok(DOCUMENTED.has(code), code)
  }
})

test('every failing call fails with a BlobcaskError and a documented code, never a napi status', async () => {
  await withStore({}, async (s, path) => {
    await s.put('k', Buffer.alloc(10))
    const up = await s.beginUpload('u', 10)
    const rejecting = {
      'read missing': [() => s.read('missing'), 'NOT_FOUND'],
      'read past the end': [() => s.read('k', 11, 1), 'INVALID_ARGUMENT'],
      'empty key': [() => s.put('', Buffer.from('x')), 'INVALID_ARGUMENT'],
      'key too large': [() => s.put('k'.repeat(2000), Buffer.from('x')), 'TOO_LARGE'],
      'locked': [() => Store.open(path), 'LOCKED'],
      'number key': [() => s.put(5, Buffer.from('x')), 'INVALID_ARGUMENT'],
      'number value': [() => s.put('k', 5), 'INVALID_ARGUMENT'],
      'Float64Array value': [() => s.put('k', new Float64Array(1)), 'INVALID_ARGUMENT'],
      'object key for get': [() => s.get({}), 'INVALID_ARGUMENT'],
      'string offset': [() => s.read('k', 'x'), 'INVALID_ARGUMENT'],
      'string ttl': [() => s.put('k', Buffer.from('x'), { ttl: '5' }), 'INVALID_ARGUMENT'],
      'string option': [() => Store.open(path + '.x', { capacity: 'big' }), 'INVALID_ARGUMENT'],
      'unknown index': [() => Store.open(path + '.x', { index: 'nope' }), 'INVALID_ARGUMENT'],
      'string path': [() => Store.open(42), 'INVALID_ARGUMENT'],
      'misaligned part': [() => up.writePart(1, Buffer.from('x')), 'INVALID_ARGUMENT'],
      'string part': [() => up.writePart(0, 'x'), 'INVALID_ARGUMENT'],
      'backup to a number': [() => s.backup(7), 'INVALID_ARGUMENT'],
      'grow to a string': [() => s.grow('1'), 'INVALID_ARGUMENT'],
      'bulkLoad of a number': [() => s.bulkLoad(5), 'INVALID_ARGUMENT'],
    }
    for (const [what, [call, code]] of Object.entries(rejecting)) {
      await assert.rejects(call(), (e) => isOurs(e, code), what)
    }
    const throwing = {
      'readSync missing': [() => s.readSync('missing'), 'NOT_FOUND'],
      'putSync of an array': [() => s.putSync('k', [1, 2]), 'INVALID_ARGUMENT'],
      'statSync of a number': [() => s.statSync(1), 'INVALID_ARGUMENT'],
      'readSync negative offset': [() => s.readSync('k', -1), 'INVALID_ARGUMENT'],
      'abortUpload of a string': [() => s.abortUpload('1'), 'INVALID_ARGUMENT'],
      'abortUpload unknown': [() => s.abortUpload(123456), 'NOT_FOUND'],
      'has of null': [() => s.has(null), 'INVALID_ARGUMENT'],
      'openSync locked': [() => Store.openSync(path), 'LOCKED'],
      'new Store()': [() => new Store(), 'INVALID_ARGUMENT'],
      'crc32c of a string': [() => crc32c('text'), 'INVALID_ARGUMENT'],
    }
    for (const [what, [call, code]] of Object.entries(throwing)) {
      assert.throws(call, (e) => isOurs(e, code), what)
    }
    await up.abort()
  })
})

test('an argument of the wrong type keeps napi status in napiStatus', async () => {
  await withStore({}, async (s) => {
    await s.put('k', Buffer.from('x'))
    await assert.rejects(s.read('k', 'x'), (e) => isOurs(e, 'INVALID_ARGUMENT') && typeof e.napiStatus === 'string')
    assert.throws(() => s.getSync(5), (e) => isOurs(e, 'INVALID_ARGUMENT') && typeof e.napiStatus === 'string')
    // Errors of blobcask's own have none.
    assert.throws(() => s.statSync('missing'), (e) => isOurs(e, 'NOT_FOUND') && !('napiStatus' in e))
  })
})

test('an OS error is the cause, with Node\'s code and errno', async () => {
  const t = tempPath()
  try {
    const file = join(t.path + '.file')
    writeFileSync(file, 'not a directory')
    const under = join(file, 'store.blobcask')
    const check = (e) => {
      isOurs(e, 'IO')
      assert.match(e.message, /not a directory/i)
      assert.ok(e.cause instanceof Error, 'no cause')
      assert.equal(e.cause.code, 'ENOTDIR')
      assert.equal(e.cause.errno, -constants.errno.ENOTDIR)
      assert.match(e.cause.message, /ENOTDIR/)
      return true
    }
    await assert.rejects(Store.open(under), check)
    assert.throws(() => Store.openSync(under), check)
    const long = join(dirname(t.path), 'x'.repeat(300))
    await assert.rejects(Store.open(long), (e) => isOurs(e) && e.cause?.code === 'ENAMETOOLONG')
  } finally {
    t.cleanup()
  }
  // An error the OS did not cause has none.
  await withStore({}, async (s) => {
    await assert.rejects(s.read('missing'), (e) => isOurs(e, 'NOT_FOUND') && e.cause === undefined)
  })
})

test('a rejection\'s stack shows the awaiting callers', async () => {
  await withStore({}, async (s, path) => {
    await s.put('k', Buffer.alloc(10))
    const up = await s.beginUpload('u', 10)
    const calls = {
      get: () => s.get(''),
      readInto: () => s.readInto('missing', Buffer.alloc(1)),
      read: () => s.read('k', 11, 1),
      stat: () => s.stat('missing'),
      delete: () => s.delete('missing'),
      put: () => s.put('', Buffer.from('x')),
      putWrongType: () => s.put(5, Buffer.from('x')),
      open: () => Store.open(path),
      beginUpload: () => s.beginUpload('huge', 2 ** 40),
      writePart: () => up.writePart(1, Buffer.from('x')),
      grow: () => s.grow(1),
      backup: () => s.backup(path),
      bulkLoad: () => s.bulkLoad([['', Buffer.from('x')]]),
      bulkLoadBadItem: () => s.bulkLoad([[1, 2]]),
    }
    for (const [what, call] of Object.entries(calls)) {
      // A named async caller: its frame must be in the stack.
      async function awaitingCallerOfBlobcask() {
        await call()
      }
      await assert.rejects(awaitingCallerOfBlobcask(), (e) => {
        isOurs(e)
        assert.match(e.stack, /^BlobcaskError: /, what)
        assert.match(e.stack, /awaitingCallerOfBlobcask/, `${what}: ${e.stack}`)
        assert.ok(e.stack.includes(here), `${what}: no frame of this file in ${e.stack}`)
        return true
      })
    }
    await up.abort()
  })
})

test('a thrown error\'s stack shows the caller', async () => {
  await withStore({}, async (s) => {
    function syncCallerOfBlobcask(call) {
      call()
    }
    const calls = {
      getSync: () => s.getSync(''),
      statSync: () => s.statSync('missing'),
      putSync: () => s.putSync('k', 42),
      putSyncBadString: () => s.putSync('k', '\ud800'),
      extraArgument: () => s.getSync('k', 'utf8'),
      has: () => s.has(42),
    }
    for (const [what, call] of Object.entries(calls)) {
      assert.throws(
        () => syncCallerOfBlobcask(call),
        (e) => isOurs(e) && /syncCallerOfBlobcask/.test(e.stack) && e.stack.includes(here),
        what,
      )
    }
  })
})

test('an exception of the caller\'s own passes through as it is', async () => {
  await withStore({}, async (s) => {
    const mine = new RangeError('from the iterable')
    function* items() {
      yield ['a', Buffer.from('1')]
      throw mine
    }
    await assert.rejects(s.bulkLoad(items()), (e) => e === mine)
  })
})

test('a key with a lone surrogate is INVALID_ARGUMENT, never folded into U+FFFD', async () => {
  await withStore({ index: 'btree' }, async (s) => {
    // Converted to UTF-8 such a key became U+FFFD: '\ud800' and '\udc00'
    // named the object stored under '\ufffd' (found by a hostile-user test).
    await s.put('\ufffd', Buffer.from('replacement character'))
    for (const bad of ['\ud800', 'a\udc00b', 'x\ud83d']) {
      for (const [name, call] of Object.entries({
        put: () => s.put(bad, Buffer.from('v')),
        get: () => s.get(bad),
        read: () => s.read(bad, 0, 1),
        stat: () => s.stat(bad),
        delete: () => s.delete(bad),
        beginUpload: () => s.beginUpload(bad, 1),
        list: async () => {
          for await (const _ of s.list(bad)) break
        },
        bulkLoad: () => s.bulkLoad([[bad, Buffer.from('v')]]),
      })) {
        await assert.rejects(call(), (e) => isOurs(e, 'INVALID_ARGUMENT'), `${name} ${JSON.stringify(bad)}`)
      }
      for (const [name, call] of Object.entries({
        has: () => s.has(bad),
        putSync: () => s.putSync(bad, Buffer.from('v')),
        getSync: () => s.getSync(bad),
        readSync: () => s.readSync(bad, 0, 1),
        statSync: () => s.statSync(bad),
        deleteSync: () => s.deleteSync(bad),
      })) {
        assert.throws(call, (e) => isOurs(e, 'INVALID_ARGUMENT'), `${name} ${JSON.stringify(bad)}`)
      }
    }
    // Nothing was written; the real U+FFFD key and a surrogate pair work.
    assert.equal((await s.stats()).objects, 1)
    assert.deepEqual(await s.get('\ufffd'), Buffer.from('replacement character'))
    await s.put('\ud83d\ude00', Buffer.from('emoji'))
    assert.deepEqual(s.getSync('😀'), Buffer.from('emoji'))
  })
})

test('paths, sizes and ttls of the wrong form are refused clearly', { timeout: 60_000 }, async (ctx) => {
  const temp = tempPath()
  ctx.after(temp.cleanup)
  const t = temp.path
  // A fractional capacity, refused as every other size is (it was truncated).
  await assert.rejects(Store.open(t, { capacity: 16 * 2 ** 20 + 0.5 }), (e) => isOurs(e, 'INVALID_ARGUMENT') && /capacity/.test(e.message))
  assert.equal(existsSync(t), false)
  // A NUL byte in the path is a bad argument, as in Python (it was IO).
  await assert.rejects(Store.open(t + '\0x'), (e) => isOurs(e, 'INVALID_ARGUMENT') && /NUL/.test(e.message))
  // A FIFO is refused by its kind at once (a read-only open hung forever).
  const fifo = t + '.fifo'
  execFileSync('mkfifo', [fifo])
  for (const options of [{ readOnly: true }, {}]) {
    await assert.rejects(Store.open(fifo, options), (e) => isOurs(e, 'INVALID_ARGUMENT') && /FIFO/.test(e.message))
  }
  // A dangling symbolic link is NOT_FOUND naming its target.
  const link = t + '.link'
  symlinkSync(t + '.gone', link)
  await assert.rejects(Store.open(link), (e) => isOurs(e, 'NOT_FOUND') && /dangling symbolic link/.test(e.message) && e.message.includes(t + '.gone'))
  // A ttl that is not a number: our message, not napi's about Rust types.
  await withStore({}, async (s) => {
    for (const ttl of ['5', true, {}, 5n]) {
      await assert.rejects(s.put('k', Buffer.from('x'), { ttl }), (e) => isOurs(e, 'INVALID_ARGUMENT') && /^ttl must be a number of milliseconds/.test(e.message) && !('napiStatus' in e), String(ttl))
      assert.throws(() => s.putSync('k', Buffer.from('x'), { ttl }), (e) => isOurs(e, 'INVALID_ARGUMENT') && /^ttl must be a number/.test(e.message), String(ttl))
    }
    assert.equal(s.has('k'), false)
  })
})
