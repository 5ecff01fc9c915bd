'use strict'
/**
 * blobcask for Node: an embedded blob store.
 *
 * Promise methods submit their I/O from the calling thread and complete on
 * Node's own event loop (large transfers on worker threads), without
 * blocking it; an open store with no call pending does not keep Node alive.
 * `...Sync` twins are for scripts. Errors are `Error` objects whose
 * `code` names the kind: 'NOT_FOUND', 'INVALID_ARGUMENT', 'TOO_LARGE',
 * 'NO_SPACE', 'CORRUPT', 'IO', 'LOCKED', 'UNSUPPORTED', 'CLOSED' (and
 * 'ALREADY_EXISTS', 'VERSION_MISMATCH' from conditional puts, and
 * 'ALREADY_EXISTS' from a backup whose destination exists). An argument
 * of the wrong type is INVALID_ARGUMENT too (napi's status in `napiStatus`).
 */
const native = require('./index.js')

const CODE = /^([A-Z_]+): /

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

/** Moves the `CODE: ` prefix the native layer puts in messages into `code`. */
function withCode(e) {
  if (e instanceof Error) {
    const m = CODE.exec(e.message)
    if (m) {
      e.code = m[1]
      e.message = e.message.slice(m[0].length)
    } else if (WRONG_TYPE.has(e.code)) {
      e.napiStatus = e.code
      e.code = 'INVALID_ARGUMENT'
    }
  }
  return e
}

async function call(fn) {
  try {
    return await fn()
  } catch (e) {
    throw withCode(e)
  }
}

function callSync(fn) {
  try {
    return fn()
  } catch (e) {
    throw withCode(e)
  }
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
  /** Makes the object visible atomically; resolves to its ObjectInfo. */
  commit() {
    return call(() => this.#n.commit())
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
    if (!(n instanceof native.Store)) throw new TypeError('use Store.open(path, options)')
    this.#n = n
  }
  /** Opens (creating when missing) the store at `path`. */
  static async open(path, options) {
    return new Store(await call(() => native.open(path, options)))
  }
  /** Synchronous `open`, for scripts. */
  static openSync(path, options) {
    return new Store(callSync(() => native.openSync(path, options)))
  }
  /**
   * Stores `value` under `key`; resolves once durable. `value` is copied
   * before this returns, so the caller may reuse its Buffer at once.
   * `conditions`: `{ ifAbsent, ifVersion, ttl }`, `ttl` in milliseconds
   * (the object expires that long after its commit).
   */
  put(key, value, conditions) {
    return call(() => this.#n.put(key, value, conditions))
  }
  /**
   * The whole object as a Buffer. Results over 16 KiB are external Buffers
   * over the engine's read buffer (no copy); each is the caller's own.
   */
  get(key) {
    return call(() => this.#n.get(key))
  }
  /** `length` bytes from `offset` (to the end when omitted), clipped at the end. */
  read(key, offset = 0, length) {
    return call(() => this.#n.read(key, offset, length))
  }
  /** Size, version and commit time. */
  stat(key) {
    return call(() => this.#n.stat(key))
  }
  /** Deletes `key`; resolves once durable. */
  delete(key) {
    return call(() => this.#n.delete(key))
  }
  /** Whether `key` has an object (no I/O). */
  has(key) {
    return callSync(() => this.#n.has(key))
  }
  /**
   * Keys starting with `prefix`, in byte order, as an async iterator of
   * Buffers. Needs index 'btree' or 'fst'. Pages through the index without
   * holding it.
   */
  async *list(prefix = '') {
    let after = null
    for (;;) {
      const page = callSync(() => this.#n.listPage(prefix, after, PAGE))
      for (const key of page) yield key
      if (page.length < PAGE) return
      after = page[page.length - 1]
    }
  }
  /** Starts a multipart upload of exactly `size` bytes. */
  async beginUpload(key, size) {
    return new Upload(await call(() => this.#n.beginUpload(key, size)))
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
  /** Finishes pending commits and releases the lock. */
  close() {
    return call(() => this.#n.close())
  }
  putSync(key, value, conditions) {
    return callSync(() => this.#n.putSync(key, value, conditions))
  }
  getSync(key) {
    return callSync(() => this.#n.getSync(key))
  }
  readSync(key, offset = 0, length) {
    return callSync(() => this.#n.readSync(key, offset, length))
  }
  statSync(key) {
    return callSync(() => this.#n.statSync(key))
  }
  deleteSync(key) {
    return callSync(() => this.#n.deleteSync(key))
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
}

/** CRC32C (Castagnoli) of `data`: the checksum `Upload.writePart` takes. */
const crc32c = (data) => native.crc32c(data)

module.exports = { Store, Upload, crc32c }
