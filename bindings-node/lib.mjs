// ESM entry point: the same classes as the CommonJS one.
import cjs from './lib.js'

export const { Store, Upload, BlobcaskError, crc32c } = cjs
export default cjs
