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

/** The keys of `Store.open`'s options (OpenOptions in lib.d.ts). */
const OPEN_OPTIONS = [
  'capacity', 'index', 'inlineThreshold', 'maxCapacity', 'ioEngine', 'directIo', 'create',
  'createNew', 'readOnly', 'salvage', 'cacheBytes', 'cacheFraction', 'warmUp', 'durability',
  'eviction',
]
const OPEN_OPTION_SET = new Set(OPEN_OPTIONS)

/**
 * `Store.open`'s options, checked for keys it does not know: a misspelt
 * one (`evict: 's3fifo'`, `maxcapacity`) would otherwise be dropped and the
 * store opened without it. Anything else is checked by the native layer.
 */
function openOptionsOf(options, site) {
  if (options === undefined || options === null) return options
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw failure('INVALID_ARGUMENT', `open options must be an object, not ${describe(options)}`, site)
  }
  for (const k of Object.keys(options)) {
    if (!OPEN_OPTION_SET.has(k)) {
      throw failure('INVALID_ARGUMENT', `unknown open option ${JSON.stringify(k)}: expected one of ${OPEN_OPTIONS.join(', ')}`, site)
    }
  }
  return options
}

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
    // A put's value as `put` takes it: bytes, or a string as its UTF-8.
    if (op.type === 'put' && out.value !== undefined) out.value = valueOf(out.value, site)
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
 * INVALID_ARGUMENT when a call got more than `max` arguments: one too many
 * is a mistake (`put(k, v, 60000)` meant as a ttl, `get(k, 'utf8')` meant
 * as an encoding), never ignored.
 */
function arity(given, max, usage, site) {
  if (given > max) {
    throw failure('INVALID_ARGUMENT', `${usage} takes at most ${max} argument${max === 1 ? '' : 's'}, not ${given}`, site)
  }
}

/**
 * A value as the native layer takes it: a Uint8Array (a Buffer included)
 * as it is, a string as its UTF-8 bytes (as classic-level and lmdb-js
 * store it; read back, it is a Buffer: `.toString()` decodes it). A string
 * with a lone surrogate has no UTF-8 form and is INVALID_ARGUMENT, as such
 * a key is. Anything else (a number, an object, an ArrayBuffer, a
 * Float64Array) is INVALID_ARGUMENT, never converted.
 */
function valueOf(value, site) {
  if (types.isUint8Array(value)) return value
  if (typeof value === 'string') {
    if (!value.isWellFormed()) {
      throw failure('INVALID_ARGUMENT', 'the value is a string that is not well-formed UTF-16 (it has a lone surrogate), so it has no UTF-8 form; encode it yourself (e.g. as a Buffer) if it must be kept', site)
    }
    return Buffer.from(value, 'utf8')
  }
  throw failure('INVALID_ARGUMENT', `the value must be a Buffer, a Uint8Array or a string, not ${describe(value)}`, site)
}

/** The bytes of `buffer`, an ArrayBufferView (Buffer, any TypedArray, DataView), to read into. */
function targetOf(buffer, site) {
  if (!ArrayBuffer.isView(buffer)) {
    throw failure('INVALID_ARGUMENT', `readInto needs a Buffer, TypedArray or DataView to read into, not ${describe(buffer)}`, site)
  }
  return types.isUint8Array(buffer) ? buffer : new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength)
}

/** Bytes `readInto` copies into the caller's buffer per event-loop turn. */
const COPY_STEP = 2 << 20

/** Least time between two calls of a bulk load's `progress`, in ms. */
const PROGRESS_INTERVAL_MS = 250

/** `bulkLoad`'s options: `{ progress }`, a function or absent. */
function loadOptionsOf(options, site) {
  if (options === undefined || options === null) return {}
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw failure('INVALID_ARGUMENT', `bulkLoad options must be an object { progress }, not ${describe(options)}`, site)
  }
  for (const k of Object.keys(options)) {
    if (k !== 'progress') throw failure('INVALID_ARGUMENT', `unknown bulkLoad option ${JSON.stringify(k)}: expected progress`, site)
  }
  const { progress } = options
  if (progress !== undefined && progress !== null && typeof progress !== 'function') {
    throw failure('INVALID_ARGUMENT', `progress must be a function (objects, bytes), not ${describe(progress)}`, site)
  }
  return { progress: progress ?? undefined }
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
    const given = arguments.length
    return call(() => {
      arity(given, 3, 'writePart(offset, data, crc32c?)', this.writePart)
      if (!types.isUint8Array(data)) {
        throw failure('INVALID_ARGUMENT', `a part must be a Buffer or Uint8Array, not ${describe(data)}`, this.writePart)
      }
      return this.#n.writePart(offset, data, crc32c)
    })
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
    const given = arguments.length
    return call(() => {
      arity(given, 1, 'commit(conditions?)', this.commit)
      return this.#n.commit(conditionsOf(conditions))
    })
  }
  /** Abandons the upload and frees its space (a no-op once it ended). */
  abort() {
    const given = arguments.length
    return call(() => {
      arity(given, 0, 'abort()', this.abort)
      return this.#n.abort()
    })
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
    const given = arguments.length
    return new Store(await call(() => {
      arity(given, 2, 'Store.open(path, options?)', Store.open)
      return native.open(path, openOptionsOf(options, Store.open))
    }))
  }
  /** Synchronous `open`, for scripts. */
  static openSync(path, options) {
    arity(arguments.length, 2, 'Store.openSync(path, options?)', Store.openSync)
    return new Store(callSync(() => native.openSync(path, openOptionsOf(options, Store.openSync))))
  }
  /**
   * Stores `value` under `key`; resolves once durable (with `durability:
   * { maxDelayMs }`, once applied: durable within `maxDelayMs`). `value` is
   * copied before this returns, so the caller may reuse its Buffer at once.
   * `conditions`: `{ ifAbsent, ifVersion, ttl }`, `ttl` in milliseconds
   * (the object expires that long after its commit).
   */
  put(key, value, conditions) {
    const given = arguments.length
    return call(() => {
      arity(given, 3, 'put(key, value, conditions?)', this.put)
      return this.#n.put(keyOf(key, this.put), valueOf(value, this.put), conditionsOf(conditions))
    })
  }
  /**
   * The whole object as a Buffer, the caller's own (writing into it changes
   * nothing else), or `undefined` when `key` has no object, as
   * classic-level's `get` resolves (a stored empty value is an empty
   * Buffer, never `undefined`). `read`, `stat` and `delete` reject with
   * NOT_FOUND instead.
   */
  get(key) {
    const given = arguments.length
    return call(() => {
      arity(given, 1, 'get(key)', this.get)
      return this.#n.get(keyOf(key, this.get))
    })
  }
  /**
   * `length` bytes from `offset` (to the end when omitted), clipped at the
   * end; an offset past the end is INVALID_ARGUMENT, a missing key
   * NOT_FOUND.
   */
  read(key, offset = 0, length) {
    const given = arguments.length
    return call(() => {
      arity(given, 3, 'read(key, offset?, length?)', this.read)
      return this.#n.read(keyOf(key, this.read), offset, length)
    })
  }
  /**
   * Reads the object from `offset` (default 0) into `buffer` (a Buffer,
   * any TypedArray or a DataView): as many bytes as `buffer` holds, fewer
   * at the object's end; resolves to the count. Rejects with NOT_FOUND when
   * `key` has no object, INVALID_ARGUMENT for an offset past the end or a
   * `buffer` that is not an ArrayBufferView. Nothing is written into
   * `buffer` on an error. The bytes are copied into `buffer` on the
   * JavaScript thread once read, 2 MiB per event-loop turn (the caller
   * must not use `buffer` until the promise settles).
   */
  readInto(key, buffer, offset = 0) {
    const given = arguments.length
    return call(async () => {
      arity(given, 3, 'readInto(key, buffer, offset?)', this.readInto)
      const target = targetOf(buffer, this.readInto)
      const bytes = await this.#n.read(keyOf(key, this.readInto), offset, target.byteLength)
      // The copy is on this thread: a step at a time, so a large read
      // holds the event loop ~1 ms per step, not for the whole copy
      // (48 MiB into a fresh buffer took 41 ms at once here).
      for (let at = 0; at < bytes.length; at += COPY_STEP) {
        if (at > 0) await new Promise(setImmediate)
        target.set(bytes.subarray(at, at + COPY_STEP), at)
      }
      return bytes.length
    })
  }
  /**
   * ObjectInfo `{ size, version, created, inline, expires }` (NOT_FOUND
   * when `key` has no object).
   */
  stat(key) {
    const given = arguments.length
    return call(() => {
      arity(given, 1, 'stat(key)', this.stat)
      return this.#n.stat(keyOf(key, this.stat))
    })
  }
  /** Deletes `key`; resolves once durable (NOT_FOUND when it has no object). */
  delete(key) {
    const given = arguments.length
    return call(() => {
      arity(given, 1, 'delete(key)', this.delete)
      return this.#n.delete(keyOf(key, this.delete))
    })
  }
  /** Whether `key` has an object (no I/O). */
  has(key) {
    arity(arguments.length, 1, 'has(key)', this.has)
    return callSync(() => this.#n.has(keyOf(key, this.has)))
  }
  /**
   * Keys starting with `prefix`, in byte order, as an async iterator of
   * Buffers, with every index. 'btree' and 'fst' are paged through
   * without being held; on 'hash' (the default) the first step reads the
   * keys from the tuple blocks (one pass, off the event loop) and keeps
   * the matching ones, sorted. Keys that exist for the whole listing come
   * once; keys added or removed meanwhile may or may not.
   */
  async *list(prefix = '') {
    arity(arguments.length, 1, 'list(prefix?)', this.list)
    const listing = await call(() => this.#n.listStart(keyOf(prefix, this.list)))
    for (;;) {
      const page = callSync(() => listing.nextPage(PAGE))
      for (const key of page) yield key
      if (page.length < PAGE) return
    }
  }
  /** Starts a multipart upload of exactly `size` bytes. */
  async beginUpload(key, size) {
    arity(arguments.length, 2, 'beginUpload(key, size)', this.beginUpload)
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
  async bulkLoad(items, options) {
    arity(arguments.length, 2, 'bulkLoad(items, options?)', this.bulkLoad)
    const { progress } = loadOptionsOf(options, this.bulkLoad)
    const iterable = items?.[Symbol.asyncIterator] ?? items?.[Symbol.iterator]
    if (typeof iterable !== 'function') {
      throw failure('INVALID_ARGUMENT', `bulkLoad takes an iterable of [key, value] pairs, not ${describe(items)}`, this.bulkLoad)
    }
    const load = callSync(() => this.#n.bulkLoad())
    const bad = (taken, what) =>
      failure('INVALID_ARGUMENT', `bulkLoad item ${taken}: ${what}; the ${taken} items before it are loaded`, this.bulkLoad)
    let taken = 0
    let bytes = 0
    let reported = performance.now()
    let stopped = null
    try {
      for await (const item of items) {
        if (!Array.isArray(item) || item.length !== 2) throw bad(taken, `not a [key, value] pair but ${describe(item)}`)
        const [key, raw] = item
        if (typeof key !== 'string' && !types.isUint8Array(key)) {
          throw bad(taken, `the key must be a string or a Uint8Array, not ${describe(key)}`)
        }
        if (illFormed(key)) throw bad(taken, ILL_FORMED)
        let value = raw
        if (typeof raw === 'string') {
          if (!raw.isWellFormed()) throw bad(taken, 'the value is a string with a lone surrogate, so it has no UTF-8 form')
          value = Buffer.from(raw, 'utf8')
        } else if (!types.isUint8Array(raw)) {
          throw bad(taken, `the value must be a Buffer, a Uint8Array or a string, not ${describe(raw)}`)
        }
        // Copied here: the iterable may reuse its Buffers.
        const full = callSync(() => load.add(key, value))
        taken++
        bytes += value.byteLength
        if (progress && performance.now() - reported >= PROGRESS_INTERVAL_MS) {
          reported = performance.now()
          progress(taken, bytes)
        }
        if (full && !(await call(() => load.feed()))) break // the load failed: finish says why
      }
    } catch (e) {
      stopped = e
    }
    // Loads what was taken (before a failure too) and ends the load.
    const report = await call(() => load.finish())
    if (stopped) throw stopped
    if (progress) progress(report.objects, report.bytes)
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
    arity(arguments.length, 0, 'listUploads()', this.listUploads)
    return callSync(() => this.#n.listUploads())
  }
  /**
   * Aborts upload `id` wherever its handle is (synchronous: memory only):
   * its space is freed once parts being written finish, and the handle's
   * later `writePart`/`commit` reject with CLOSED. Throws NOT_FOUND when no
   * such upload is in progress, CLOSED after `close()`.
   */
  abortUpload(id) {
    arity(arguments.length, 1, 'abortUpload(id)', this.abortUpload)
    return callSync(() => this.#n.abortUpload(id))
  }
  /** Space and content figures. */
  stats() {
    arity(arguments.length, 0, 'stats()', this.stats)
    return callSync(() => this.#n.stats())
  }
  /**
   * Grows the store file to `capacity` bytes now (a store also grows by
   * itself as it fills, up to `maxCapacity`). INVALID_ARGUMENT for a
   * smaller size or one above `maxCapacity`, UNSUPPORTED on a block device
   * or a read-only store, NO_SPACE when the file system is full.
   */
  grow(capacity) {
    const given = arguments.length
    return call(() => {
      arity(given, 1, 'grow(capacity)', this.grow)
      return this.#n.grow(capacity)
    })
  }
  /** Barrier: resolves once everything acknowledged before is durable. */
  sync() {
    const given = arguments.length
    return call(() => {
      arity(given, 0, 'sync()', this.sync)
      return this.#n.sync()
    })
  }
  /**
   * Writes a consistent copy of the store to `dest`, a path that must not
   * exist yet, while other calls go on; resolves to a BackupReport
   * `{ path, objects, bytes, elapsedMs }` once the copy is verified and in
   * place. Open it with `Store.open(dest)`. ALREADY_EXISTS if `dest`
   * exists (nothing is ever replaced), NOT_FOUND if its directory does not.
   */
  backup(dest) {
    const given = arguments.length
    return call(() => {
      arity(given, 1, 'backup(dest)', this.backup)
      return this.#n.backup(dest)
    })
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
    const given = arguments.length
    return call(() => {
      arity(given, 0, 'compact()', this.compact)
      return this.#n.compact()
    })
  }
  /**
   * Finishes pending commits and releases the lock. Every later call
   * (Promise, Sync, `has`, `stats`, `list`, `listUploads`, an Upload's
   * `writePart`/`commit`, ...) fails with CLOSED; `close()`/`closeSync()`
   * again do nothing, and an Upload's `abort()` still succeeds.
   */
  close() {
    const given = arguments.length
    return call(() => {
      arity(given, 0, 'close()', this.close)
      return this.#n.close()
    })
  }
  putSync(key, value, conditions) {
    arity(arguments.length, 3, 'putSync(key, value, conditions?)', this.putSync)
    return callSync(() => this.#n.putSync(keyOf(key, this.putSync), valueOf(value, this.putSync), conditionsOf(conditions)))
  }
  /** Synchronous `get`: `undefined` when `key` has no object. */
  getSync(key) {
    arity(arguments.length, 1, 'getSync(key)', this.getSync)
    return callSync(() => this.#n.getSync(keyOf(key, this.getSync)))
  }
  readSync(key, offset = 0, length) {
    arity(arguments.length, 3, 'readSync(key, offset?, length?)', this.readSync)
    return callSync(() => this.#n.readSync(keyOf(key, this.readSync), offset, length))
  }
  /** Synchronous `readInto` (blocks the event loop; for scripts). */
  readIntoSync(key, buffer, offset = 0) {
    arity(arguments.length, 3, 'readIntoSync(key, buffer, offset?)', this.readIntoSync)
    const target = targetOf(buffer, this.readIntoSync)
    const bytes = callSync(() => this.#n.readSync(keyOf(key, this.readIntoSync), offset, target.byteLength))
    target.set(bytes)
    return bytes.length
  }
  statSync(key) {
    arity(arguments.length, 1, 'statSync(key)', this.statSync)
    return callSync(() => this.#n.statSync(keyOf(key, this.statSync)))
  }
  deleteSync(key) {
    arity(arguments.length, 1, 'deleteSync(key)', this.deleteSync)
    return callSync(() => this.#n.deleteSync(keyOf(key, this.deleteSync)))
  }
  growSync(capacity) {
    arity(arguments.length, 1, 'growSync(capacity)', this.growSync)
    return callSync(() => this.#n.growSync(capacity))
  }
  syncSync() {
    arity(arguments.length, 0, 'syncSync()', this.syncSync)
    return callSync(() => this.#n.syncSync())
  }
  backupSync(dest) {
    arity(arguments.length, 1, 'backupSync(dest)', this.backupSync)
    return callSync(() => this.#n.backupSync(dest))
  }
  compactSync() {
    arity(arguments.length, 0, 'compactSync()', this.compactSync)
    return callSync(() => this.#n.compactSync())
  }
  closeSync() {
    arity(arguments.length, 0, 'closeSync()', this.closeSync)
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
    const given = arguments.length
    try {
      return await call(() => {
        arity(given, 1, 'batch(operations)', this.batch)
        return this.#n.batch(operationsOf(operations, this.batch))
      })
    } catch (e) {
      throw withBatchOp(e)
    }
  }
  batchSync(operations) {
    arity(arguments.length, 1, 'batchSync(operations)', this.batchSync)
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
    arity(arguments.length, 1, 'getMany(keys)', this.getMany)
    if (!Array.isArray(keys)) {
      throw failure('INVALID_ARGUMENT', `getMany takes an array of keys, not ${describe(keys)}`, this.getMany)
    }
    const got = await call(() => this.#n.getMany(keys.map((k) => keyOf(k, this.getMany))))
    return got.map((b) => b ?? undefined)
  }
  /**
   * Synchronous `getMany` (blocks the event loop; for scripts): the same
   * answer, each key read as `getSync` reads it.
   */
  getManySync(keys) {
    arity(arguments.length, 1, 'getManySync(keys)', this.getManySync)
    if (!Array.isArray(keys)) {
      throw failure('INVALID_ARGUMENT', `getManySync takes an array of keys, not ${describe(keys)}`, this.getManySync)
    }
    const got = callSync(() => this.#n.getManySync(keys.map((k) => keyOf(k, this.getManySync))))
    return got.map((b) => b ?? undefined)
  }
}

/**
 * `await using` (explicit resource management): a store is closed, an
 * upload aborted (a no-op once committed) when its scope ends. Defined
 * where the runtime has `Symbol.asyncDispose` (Node 18.18+, 20.4+).
 */
if (typeof Symbol.asyncDispose === 'symbol') {
  const dispose = (fn) => ({ value: fn, writable: true, configurable: true, enumerable: false })
  Object.defineProperty(Store.prototype, Symbol.asyncDispose, dispose(function () {
    return this.close()
  }))
  Object.defineProperty(Upload.prototype, Symbol.asyncDispose, dispose(function () {
    return this.abort()
  }))
}

/** CRC32C (Castagnoli) of `data`: the checksum `Upload.writePart` takes. */
function crc32c(data) {
  arity(arguments.length, 1, 'crc32c(data)', crc32c)
  return callSync(() => native.crc32c(data))
}

module.exports = { Store, Upload, BlobcaskError, crc32c }
