'use strict'
/**
 * blobcask for Node: an embedded blob store.
 *
 * Promise methods submit their I/O from the calling thread and complete on
 * Node's own event loop (large transfers on worker threads), without
 * blocking it; an open store with no call pending does not keep Node alive.
 * `...Sync` twins are for scripts.
 *
 * Errors: every error blobcask throws or rejects with is a `BlobcaskError`
 * whose `code` is one of 'NOT_FOUND', 'INVALID_ARGUMENT', 'TOO_LARGE',
 * 'NO_SPACE', 'CORRUPT', 'IO', 'LOCKED', 'UNSUPPORTED', 'CLOSED',
 * 'ALREADY_EXISTS', 'VERSION_MISMATCH' or 'INTERNAL' (a bug: a panic, or a
 * Node-API failure). An argument of the wrong type is INVALID_ARGUMENT
 * (napi's own status in `napiStatus`). When the operating system reported
 * the cause, `cause` is an Error with Node's `code` for it ('ENOENT',
 * 'ENOTDIR', ...) and `errno` (negative, as in Node's own errors). The
 * error is made in the call's own frame, so `stack` shows the caller (for
 * a Promise, the async functions awaiting it). Exceptions of the caller's
 * own (an iterable given to `bulkLoad` that throws) pass through as they
 * are.
 */
const { getSystemErrorMap, types } = require('util')
const native = require('./index.js')

/** An error of blobcask: `code` names the kind (see `ErrorCode` in lib.d.ts). */
class BlobcaskError extends Error {
  constructor(code, message, options) {
    super(message, options)
    this.code = code
  }
}
Object.defineProperty(BlobcaskError.prototype, 'name', {
  value: 'BlobcaskError',
  writable: true,
  configurable: true,
})

/** The native layer's message prefix: `CODE: ` or `CODE/errno: `. */
const TAG = /^([A-Z_]+)(?:\/(\d+))?: /

/**
 * napi-rs's own statuses for an argument of the wrong JavaScript type
 * (`put(5, buf)`, `{ cacheBytes: '64' }`): reported as INVALID_ARGUMENT,
 * the documented code, with napi's status kept in `napiStatus`.
 */
const WRONG_TYPE = new Set([
  'InvalidArg',
  'ObjectExpected',
  'StringExpected',
  'NameExpected',
  'FunctionExpected',
  'NumberExpected',
  'BooleanExpected',
  'ArrayExpected',
  'BigintExpected',
  'DateExpected',
  'ArrayBufferExpected',
  'DetachableArraybufferExpected',
])

/** napi-rs's other statuses: a failure of Node-API itself, INTERNAL. */
const NAPI_FAILURE = new Set([
  'GenericFailure',
  'PendingException',
  'Cancelled',
  'EscapeCalledTwice',
  'HandleScopeMismatch',
  'CallbackScopeMismatch',
  'QueueFull',
  'Closing',
  'WouldDeadlock',
  'NoExternalBuffersAllowed',
  'CannotRunJs',
  'Unknown',
])

/** The OS error numbered `errno` (positive, as the native layer gives it). */
function systemError(errno, site) {
  const [name, text] = getSystemErrorMap().get(-errno) ?? [`errno ${errno}`, 'unknown error']
  const err = Object.assign(new Error(`${text} (${name})`), { code: name, errno: -errno })
  Error.captureStackTrace(err, site)
  return err
}

/**
 * The BlobcaskError for `e`, an error of the native layer, with its stack
 * taken here, below `site` (the frames of `site` and above are left out);
 * any other exception as it is.
 */
function translate(e, site) {
  if (!(e instanceof Error) || e instanceof BlobcaskError) return e
  let code
  let message = e.message
  let cause
  const m = TAG.exec(message)
  if (m) {
    code = m[1]
    message = message.slice(m[0].length)
    if (m[2] !== undefined) cause = systemError(Number(m[2]), site)
  } else if (WRONG_TYPE.has(e.code)) {
    code = 'INVALID_ARGUMENT'
  } else if (NAPI_FAILURE.has(e.code)) {
    code = 'INTERNAL'
  } else {
    return e
  }
  const err = new BlobcaskError(code, message, cause && { cause })
  if (!m) err.napiStatus = e.code
  Error.captureStackTrace(err, site)
  return err
}

/** A BlobcaskError of this layer's own, its stack below `site`. */
function failure(code, message, site) {
  const err = new BlobcaskError(code, message)
  Error.captureStackTrace(err, site)
  return err
}

/**
 * Runs a native Promise call. A rejection is translated after the await,
 * so its stack holds the async frames of the callers awaiting it (V8's
 * async stack traces; no cost on success); a synchronous throw (a bad
 * argument, CLOSED) has the caller's frames too.
 */
async function call(fn) {
  try {
    return await fn()
  } catch (e) {
    throw translate(e, call)
  }
}

function callSync(fn) {
  try {
    return fn()
  } catch (e) {
    throw translate(e, callSync)
  }
}

const CONDITIONS = new Set(['ifAbsent', 'ifVersion', 'ttl'])

const OPERATION_FIELDS = new Set(['type', 'key', 'value', 'ifAbsent', 'ifVersion', 'ttl'])

/**
 * A batch's operations as the native layer takes them: an array of
 * `{ type: 'put', key, value, ifAbsent?, ifVersion?, ttl? }` and
 * `{ type: 'del', key, ifVersion? }`. Anything else (not an array, an
 * unknown field, a key that has no UTF-8 form) is INVALID_ARGUMENT naming
 * the operation.
 */
function operationsOf(ops, site) {
  if (!Array.isArray(ops)) {
    throw failure('INVALID_ARGUMENT', `batch takes an array of operations, not ${describe(ops)}`, site)
  }
  return ops.map((op, i) => {
    if (typeof op !== 'object' || op === null || Array.isArray(op)) {
      throw failure('INVALID_ARGUMENT', `batch operation ${i}: an object { type, key, ... }, not ${describe(op)}`, site)
    }
    const out = {}
    for (const k of Object.keys(op)) {
      if (!OPERATION_FIELDS.has(k)) {
        throw failure('INVALID_ARGUMENT', `batch operation ${i}: unknown field ${JSON.stringify(k)}`, site)
      }
      if (op[k] !== null && op[k] !== undefined) out[k] = op[k]
    }
    out.key = keyOf(op.key, site)
    return out
  })
}

/** A refused batch's error names its operation in `batchOp` too. */
const BATCH_OP = /batch operation (\d+) \(/

function withBatchOp(e) {
  if (e instanceof BlobcaskError) {
    const m = BATCH_OP.exec(e.message)
    if (m) e.batchOp = Number(m[1])
  }
  return e
}

/**
 * Put conditions as the native layer takes them. `undefined` or `null`: none.
 * Otherwise an object of `ifAbsent`, `ifVersion` and `ttl`, a `null` field
 * counting as absent. Anything else is INVALID_ARGUMENT, never ignored: a
 * number given as the ttl (`put(k, v, 60000)`) or a misspelt field
 * (`{ tll: 60000 }`) would otherwise store an object that never expires.
 */
function conditionsOf(c) {
  if (c === undefined || c === null) return undefined
  if (typeof c !== 'object' || Array.isArray(c)) {
    throw failure('INVALID_ARGUMENT', `conditions must be an object { ifAbsent, ifVersion, ttl }, not ${describe(c)}`, conditionsOf)
  }
  const out = {}
  for (const k of Object.keys(c)) {
    if (!CONDITIONS.has(k)) {
      throw failure('INVALID_ARGUMENT', `unknown condition ${JSON.stringify(k)}: expected ifAbsent, ifVersion or ttl`, conditionsOf)
    }
    if (c[k] !== undefined && c[k] !== null) out[k] = c[k]
  }
  // A ttl of another type (`'5s'`) would reach napi, whose message names
  // Rust types.
  if (out.ttl !== undefined && typeof out.ttl !== 'number') {
    throw failure('INVALID_ARGUMENT', `ttl must be a number of milliseconds or null, not ${describe(out.ttl)}`, conditionsOf)
  }
  return out
}

/** A short description of a value for error messages. */
function describe(v) {
  if (v === null) return 'null'
  if (typeof v === 'object') return v.constructor?.name ?? 'object'
  return typeof v
}

/**
 * A key as the native layer takes it. A string with a lone surrogate
 * (`'\ud800'`) has no UTF-8 form: converted, it would become U+FFFD and
 * name the same object as `'\ufffd'` (and as every other such string), so
 * it is INVALID_ARGUMENT instead, as Python refuses it. Anything else
 * goes on as it is (the native layer checks types and sizes).
 */
function keyOf(key, site) {
  if (illFormed(key)) throw failure('INVALID_ARGUMENT', `${ILL_FORMED}; encode it yourself (e.g. as a Buffer) if it must be kept`, site)
  return key
}

const ILL_FORMED = 'the key is not well-formed UTF-16 (it has a lone surrogate), so it has no UTF-8 form'

function illFormed(key) {
  return typeof key === 'string' && !key.isWellFormed()
}

const PAGE = 1024

/** A multipart upload; parts may be written in any order, concurrently. */
class Upload {
  #n
  constructor(n) {
    this.#n = n
  }
  /**
   * This upload's id in `store.listUploads()` (for `store.abortUpload`);
   * still readable once committed or aborted.
   */
  get id() {
    return this.#n.id
  }
  /**
   * Writes `data` at `offset` (a multiple of 4096); with `crc32c` (see
   * `crc32c()`) the bytes are checked against it before anything is written.
   */
  writePart(offset, data, crc32c) {
    return call(() => this.#n.writePart(offset, data, crc32c))
  }
  /**
   * Makes the object visible atomically; resolves to its ObjectInfo.
   * `conditions` (`{ ifAbsent, ifVersion, ttl }`) as for `Store.put`: a bad
   * one rejects with INVALID_ARGUMENT and leaves the upload as it was. A
   * commit the store refuses ends the upload and frees its space: a
   * condition not met (ALREADY_EXISTS, VERSION_MISMATCH), or bytes never
   * written (INVALID_ARGUMENT).
   */
  commit(conditions) {
    return call(() => this.#n.commit(conditionsOf(conditions)))
  }
  /** Abandons the upload and frees its space. */
  abort() {
    return call(() => this.#n.abort())
  }
}

/** An open blob store. Create with `await Store.open(path, options)`. */
class Store {
  #n
  constructor(n) {
    if (!(n instanceof native.Store)) {
      throw failure('INVALID_ARGUMENT', 'use Store.open(path, options) or Store.openSync', Store)
    }
    this.#n = n
  }
  /**
   * Opens (creating when missing) the store at `path`. `options`: see
   * OpenOptions in lib.d.ts (`capacity`, `index`, `durability`, ...).
   */
  static async open(path, options) {
    return new Store(await call(() => native.open(path, options)))
  }
  /** Synchronous `open`, for scripts. */
  static openSync(path, options) {
    return new Store(callSync(() => native.openSync(path, options)))
  }
  /**
   * Stores `value` under `key`; resolves once durable (with `durability:
   * { maxDelayMs }`, once applied: durable within `maxDelayMs`). `value` is
   * copied before this returns, so the caller may reuse its Buffer at once.
   * `conditions`: `{ ifAbsent, ifVersion, ttl }`, `ttl` in milliseconds
   * (the object expires that long after its commit).
   */
  put(key, value, conditions) {
    return call(() => this.#n.put(keyOf(key, this.put), value, conditionsOf(conditions)))
  }
  /**
   * The whole object as a Buffer, the caller's own (writing into it changes
   * nothing else). Rejects with NOT_FOUND when `key` has no object (as
   * `read`, `stat` and `delete` do, and their Sync twins throw): `has(key)`
   * asks without an error.
   */
  get(key) {
    return call(() => this.#n.get(keyOf(key, this.get)))
  }
  /**
   * `length` bytes from `offset` (to the end when omitted), clipped at the
   * end; an offset past the end is INVALID_ARGUMENT, a missing key
   * NOT_FOUND.
   */
  read(key, offset = 0, length) {
    return call(() => this.#n.read(keyOf(key, this.read), offset, length))
  }
  /**
   * ObjectInfo `{ size, version, created, inline, expires }` (NOT_FOUND
   * when `key` has no object).
   */
  stat(key) {
    return call(() => this.#n.stat(keyOf(key, this.stat)))
  }
  /** Deletes `key`; resolves once durable (NOT_FOUND when it has no object). */
  delete(key) {
    return call(() => this.#n.delete(keyOf(key, this.delete)))
  }
  /** Whether `key` has an object (no I/O). */
  has(key) {
    return callSync(() => this.#n.has(keyOf(key, this.has)))
  }
  /**
   * Keys starting with `prefix`, in byte order, as an async iterator of
   * Buffers. Needs index 'btree' or 'fst'. Pages through the index without
   * holding it.
   */
  async *list(prefix = '') {
    let after = null
    for (;;) {
      const page = callSync(() => this.#n.listPage(keyOf(prefix, this.list), after, PAGE))
      for (const key of page) yield key
      if (page.length < PAGE) return
      after = page[page.length - 1]
    }
  }
  /** Starts a multipart upload of exactly `size` bytes. */
  async beginUpload(key, size) {
    return new Upload(await call(() => this.#n.beginUpload(keyOf(key, this.beginUpload), size)))
  }
  /**
   * Loads every `[key, value]` pair of `items` (an array, a Map, any
   * iterable or async iterable) at sequential-write speed, replacing
   * existing keys; resolves to a LoadReport `{ objects, bytes, groups,
   * elapsedMs }` once all are committed. Keys and values are checked like
   * `put`'s and copied as they are taken, in batches, so memory stays
   * bounded whatever the total. Objects become visible commit group by
   * commit group, in the order given; a crash leaves a prefix of them.
   * A bad item (not a `[key, value]` array, a value that is not a
   * Uint8Array) or an exception of the iterable ends the load: the items
   * before it are loaded, and the promise rejects with INVALID_ARGUMENT
   * (naming the item's index) or with the iterable's own exception. An
   * error of the store (TOO_LARGE key, NO_SPACE, ...) rejects with it, and
   * takes precedence; the commit groups finished before it stay (its
   * message says how many objects). UNSUPPORTED on a read-only store,
   * CLOSED after `close()`.
   */
  async bulkLoad(items) {
    const iterable = items?.[Symbol.asyncIterator] ?? items?.[Symbol.iterator]
    if (typeof iterable !== 'function') {
      throw failure('INVALID_ARGUMENT', `bulkLoad takes an iterable of [key, value] pairs, not ${describe(items)}`, this.bulkLoad)
    }
    const load = callSync(() => this.#n.bulkLoad())
    const bad = (taken, what) =>
      failure('INVALID_ARGUMENT', `bulkLoad item ${taken}: ${what}; the ${taken} items before it are loaded`, this.bulkLoad)
    let taken = 0
    let stopped = null
    try {
      for await (const item of items) {
        if (!Array.isArray(item) || item.length !== 2) throw bad(taken, `not a [key, value] pair but ${describe(item)}`)
        const [key, value] = item
        if (typeof key !== 'string' && !types.isUint8Array(key)) {
          throw bad(taken, `the key must be a string or a Uint8Array, not ${describe(key)}`)
        }
        if (illFormed(key)) throw bad(taken, ILL_FORMED)
        if (!types.isUint8Array(value)) throw bad(taken, `the value must be a Buffer or Uint8Array, not ${describe(value)}`)
        // Copied here: the iterable may reuse its Buffers.
        const full = callSync(() => load.add(key, value))
        taken++
        if (full && !(await call(() => load.feed()))) break // the load failed: finish says why
      }
    } catch (e) {
      stopped = e
    }
    // Loads what was taken (before a failure too) and ends the load.
    const report = await call(() => load.finish())
    if (stopped) throw stopped
    return report
  }
  /**
   * The uploads in progress on this store, oldest first: an array of
   * `{ id, key, size, written, started }` (`key` a Buffer, `started` in
   * milliseconds since the epoch). Memory only, no I/O. Only uploads begun
   * through this process's open store are listed; uploads are not
   * persisted (one not committed when the process ends is gone at the next
   * open, its space free).
   */
  listUploads() {
    return callSync(() => this.#n.listUploads())
  }
  /**
   * Aborts upload `id` wherever its handle is (synchronous: memory only):
   * its space is freed once parts being written finish, and the handle's
   * later `writePart`/`commit` reject with CLOSED. Throws NOT_FOUND when no
   * such upload is in progress, CLOSED after `close()`.
   */
  abortUpload(id) {
    return callSync(() => this.#n.abortUpload(id))
  }
  /** Space and content figures. */
  stats() {
    return callSync(() => this.#n.stats())
  }
  /**
   * Grows the store file to `capacity` bytes now (a store also grows by
   * itself as it fills, up to `maxCapacity`). INVALID_ARGUMENT for a
   * smaller size or one above `maxCapacity`, UNSUPPORTED on a block device
   * or a read-only store, NO_SPACE when the file system is full.
   */
  grow(capacity) {
    return call(() => this.#n.grow(capacity))
  }
  /** Barrier: resolves once everything acknowledged before is durable. */
  sync() {
    return call(() => this.#n.sync())
  }
  /**
   * Writes a consistent copy of the store to `dest`, a path that must not
   * exist yet, while other calls go on; resolves to a BackupReport
   * `{ path, objects, bytes, elapsedMs }` once the copy is verified and in
   * place. Open it with `Store.open(dest)`. ALREADY_EXISTS if `dest`
   * exists (nothing is ever replaced), NOT_FOUND if its directory does not.
   */
  backup(dest) {
    return call(() => this.#n.backup(dest))
  }
  /**
   * Moves objects towards the start of the store so that free space left
   * in small holes by deletes joins into large pieces, while other calls go
   * on; resolves to a CompactReport `{ moved, bytesMoved,
   * largestFreeBefore, largestFreeAfter, elapsedMs }`. Moved objects keep
   * their version, creation time and expiry. UNSUPPORTED on a read-only
   * store.
   */
  compact() {
    return call(() => this.#n.compact())
  }
  /**
   * Finishes pending commits and releases the lock. Every later call
   * (Promise, Sync, `has`, `stats`, `list`, `listUploads`, an Upload's
   * `writePart`/`commit`, ...) fails with CLOSED; `close()`/`closeSync()`
   * again do nothing, and an Upload's `abort()` still succeeds.
   */
  close() {
    return call(() => this.#n.close())
  }
  putSync(key, value, conditions) {
    return callSync(() => this.#n.putSync(keyOf(key, this.putSync), value, conditionsOf(conditions)))
  }
  getSync(key) {
    return callSync(() => this.#n.getSync(keyOf(key, this.getSync)))
  }
  readSync(key, offset = 0, length) {
    return callSync(() => this.#n.readSync(keyOf(key, this.readSync), offset, length))
  }
  statSync(key) {
    return callSync(() => this.#n.statSync(keyOf(key, this.statSync)))
  }
  deleteSync(key) {
    return callSync(() => this.#n.deleteSync(keyOf(key, this.deleteSync)))
  }
  growSync(capacity) {
    return callSync(() => this.#n.growSync(capacity))
  }
  syncSync() {
    return callSync(() => this.#n.syncSync())
  }
  backupSync(dest) {
    return callSync(() => this.#n.backupSync(dest))
  }
  compactSync() {
    return callSync(() => this.#n.compactSync())
  }
  closeSync() {
    return callSync(() => this.#n.closeSync())
  }
  /**
   * Commits every operation or none, as one commit with one sync (like
   * classic-level's `batch(operations)`): `{ type: 'put', key, value,
   * ifAbsent?, ifVersion?, ttl? }` and `{ type: 'del', key, ifVersion? }`
   * (a del of a missing key changes nothing). Resolves once durable, with
   * each operation's outcome: a put's ObjectInfo, whether a del removed an
   * object. A failed condition (ALREADY_EXISTS, VERSION_MISMATCH), a bad
   * key or value, or a key given twice (INVALID_ARGUMENT) rejects the
   * whole batch, writing nothing; the error's `batchOp` is the index of
   * that operation. Values are copied before this returns.
   */
  async batch(operations) {
    try {
      return await call(() => this.#n.batch(operationsOf(operations, this.batch)))
    } catch (e) {
      throw withBatchOp(e)
    }
  }
  batchSync(operations) {
    try {
      return callSync(() => this.#n.batchSync(operationsOf(operations, this.batchSync)))
    } catch (e) {
      throw withBatchOp(e)
    }
  }
  /**
   * The whole object of each key, in order, as Buffers the caller owns;
   * `undefined` for a key without one (as classic-level's `getMany`). The
   * keys are read independently, not as one snapshot.
   */
  async getMany(keys) {
    if (!Array.isArray(keys)) {
      throw failure('INVALID_ARGUMENT', `getMany takes an array of keys, not ${describe(keys)}`, this.getMany)
    }
    const got = await call(() => this.#n.getMany(keys.map((k) => keyOf(k, this.getMany))))
    return got.map((b) => b ?? undefined)
  }
}

/** CRC32C (Castagnoli) of `data`: the checksum `Upload.writePart` takes. */
const crc32c = (data) => callSync(() => native.crc32c(data))

module.exports = { Store, Upload, BlobcaskError, crc32c }
