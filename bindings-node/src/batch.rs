//! `Store.batch(operations)`: puts and deletes committed all or nothing,
//! as classic-level's `batch([{ type: 'put', key, value }, { type: 'del',
//! key }])`, each with its own conditions; and `Store.getMany(keys)` /
//! `getManySync(keys)`.
//! lib.js checks the array's shape and sets `batchOp` on the error of a
//! refused batch (the core names the operation in its message).

use engine::{BatchOutcome, Bytes};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::args::{key_of, put_options, version_of, PutConditions};
use crate::errors::{invalid, js_err};
use crate::host::Promise;
use crate::records::{js, Js};
use crate::results::ObjectBytes;
use crate::store::{get_whole_sync, Store};

/// One operation of a batch.
#[napi(object)]
pub struct BatchOperation {
    /// `'put'` or `'del'`.
    #[napi(js_name = "type", ts_type = "'put' | 'del'")]
    pub kind: String,
    #[napi(ts_type = "string | Uint8Array")]
    pub key: Either<String, Uint8Array>,
    /// A put's value (required for `'put'`, refused for `'del'`).
    pub value: Option<Uint8Array>,
    /// A put only if the key has no object (ALREADY_EXISTS otherwise).
    pub if_absent: Option<bool>,
    /// A put or del only if the key holds this version (VERSION_MISMATCH
    /// otherwise).
    #[napi(ts_type = "number | bigint")]
    pub if_version: Option<Either<f64, BigInt>>,
    /// A put's time to live in milliseconds.
    #[napi(ts_type = "number | null")]
    pub ttl: Option<Either<f64, Null>>,
}

/// The operations as an engine batch (values copied: the caller may reuse
/// its Buffers once the call returns).
fn batch_of(store: &engine::Store, ops: Vec<BatchOperation>) -> Result<engine::Batch> {
    let mut batch = store.batch();
    for (i, op) in ops.into_iter().enumerate() {
        let at = |what: &str| invalid(format!("batch operation {i}: {what}"));
        let key = key_of(op.key);
        match (op.kind.as_str(), op.value) {
            ("put", Some(value)) => {
                let options = put_options(Some(PutConditions {
                    if_absent: op.if_absent,
                    if_version: op.if_version,
                    ttl: op.ttl,
                }))?;
                batch.put_with(key, Bytes::copy_from_slice(&value), options);
            }
            ("put", None) => return Err(at("a put needs a value")),
            ("del", None) if op.if_absent.is_none() && op.ttl.is_none() => {
                match op.if_version.map(version_of).transpose()? {
                    Some(v) => batch.delete_if_version(key, v),
                    None => batch.delete(key),
                };
            }
            ("del", _) => return Err(at("a del takes a key and ifVersion only")),
            (other, _) => {
                return Err(at(&format!("type must be 'put' or 'del', not {other:?}")));
            }
        }
    }
    Ok(batch)
}

/// Each outcome: a put's ObjectInfo, whether a del removed an object.
fn outcomes_of(outcomes: Vec<BatchOutcome>) -> Result<Vec<Either<Js, bool>>> {
    outcomes
        .into_iter()
        .map(|o| match o {
            BatchOutcome::Put(info) => Ok(Either::A(js(&info))),
            BatchOutcome::Deleted { existed } => Ok(Either::B(existed)),
            _ => Err(Error::new(
                Status::GenericFailure,
                "INTERNAL: a batch outcome this binding does not know",
            )),
        })
        .collect()
}

#[napi]
impl Store {
    /// Commits every operation or none (one commit, one sync); resolves once
    /// durable with each operation's outcome. A refused batch (a failed
    /// condition, a bad key, a key twice) changes nothing.
    #[napi(ts_return_type = "Promise<Array<ObjectInfo | boolean>>")]
    pub fn batch(&self, env: &Env, operations: Vec<BatchOperation>) -> Result<Promise> {
        let mut batch = batch_of(&self.inner, operations)?;
        self.host(env)?.spawn(|_| async move {
            let outcomes = batch.commit().await.map_err(js_err)?;
            outcomes_of(outcomes)
        })
    }

    /// Synchronous `batch`.
    #[napi(ts_return_type = "Array<ObjectInfo | boolean>")]
    pub fn batch_sync(&self, operations: Vec<BatchOperation>) -> Result<Vec<Either<Js, bool>>> {
        self.check_open()?;
        let mut batch = batch_of(&self.inner, operations)?;
        let outcomes = engine::io::block_on(batch.commit()).map_err(js_err)?;
        outcomes_of(outcomes)
    }

    /// The whole object of each key, in order (`null` for a key without
    /// one; lib.js gives `undefined`). Not one snapshot.
    #[napi(ts_return_type = "Promise<Array<Buffer | null>>")]
    pub fn get_many(&self, env: &Env, keys: Vec<Either<String, Uint8Array>>) -> Result<Promise> {
        let keys: Vec<Bytes> = keys.into_iter().map(key_of).collect();
        let store = self.inner.clone();
        self.host(env)?.spawn(|_| async move {
            let got = store.get_many(&keys).await.map_err(js_err)?;
            let copy = engine::ReadOptions::default();
            Ok(got
                .into_iter()
                .map(|b| b.map(|b| ObjectBytes::new(b, copy)))
                .collect::<Vec<_>>())
        })
    }

    /// Synchronous `getMany`: the keys read one after another on the
    /// calling thread, each as `getSync` reads it (`null` for a key without
    /// one; lib.js gives `undefined`). Any error but a miss fails the call.
    /// Not one snapshot.
    #[napi(ts_return_type = "Array<Buffer | null>")]
    pub fn get_many_sync(
        &self,
        keys: Vec<Either<String, Uint8Array>>,
    ) -> Result<Vec<Option<ObjectBytes>>> {
        self.check_open()?;
        let keys: Vec<Bytes> = keys.into_iter().map(key_of).collect();
        let store = self.blocking();
        keys.into_iter()
            .map(|key| match get_whole_sync(&store, key)? {
                Either::A(bytes) => Ok(Some(bytes)),
                Either::B(()) => Ok(None),
            })
            .collect()
    }
}
