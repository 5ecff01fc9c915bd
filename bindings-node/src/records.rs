//! The core's reports (`engine::report`) as plain JavaScript objects,
//! built from the core's one list of figures rather than copied field by
//! field, so that every figure the core gives reaches JavaScript:
//!
//! * names in camelCase (`largest_free_piece` → `largestFreePiece`), a
//!   duration's with `Ms` appended (`elapsed` → `elapsedMs`);
//! * counts as numbers, so that `JSON.stringify` works: exact up to
//!   `Number.MAX_SAFE_INTEGER`, which no count of a store reaches in
//!   practice (a configured bound such as a cache of 2^60 bytes may: it is
//!   rounded); a `version` above it, which must stay exact for `ifVersion`,
//!   is a bigint;
//! * times as milliseconds since the Unix epoch (as `Date.now()`),
//!   durations in milliseconds; an absent figure as `null`; a key as a
//!   Buffer; nested reports as nested objects.
//!
//! The TypeScript types of these objects are in `lib.d.ts`.

use engine::report::{unix_seconds, Figure, Record, Report};
use napi::bindgen_prelude::*;

/// `Number.MAX_SAFE_INTEGER`: counts up to it cross as exact numbers.
pub(crate) const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// A report on its way to JavaScript.
pub struct Js(Record);

/// The report `r` as a JavaScript object.
pub(crate) fn js(r: &impl Report) -> Js {
    Js(r.record())
}

/// `snake_case` as `camelCase`.
pub(crate) fn camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        match (c, upper) {
            ('_', _) => upper = true,
            (c, true) => {
                out.extend(c.to_uppercase());
                upper = false;
            }
            (c, false) => out.push(c),
        }
    }
    out
}

impl TypeName for Js {
    fn type_name() -> &'static str {
        "object"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

#[expect(
    unsafe_code,
    reason = "napi-rs's conversion trait is unsafe to implement; nothing here is unsafe"
)]
impl ToNapiValue for Js {
    unsafe fn to_napi_value(raw: napi::sys::napi_env, val: Self) -> Result<napi::sys::napi_value> {
        let env = Env::from_raw(raw);
        let Js(Record { kind, figures }) = val;
        let mut obj = Object::new(&env)?;
        for (name, figure) in figures {
            let name = camel(name);
            match figure {
                Figure::Count(n) if n > MAX_SAFE_INTEGER && name == "version" => {
                    obj.set(name, BigInt::from(n))
                }
                Figure::Count(n) => obj.set(name, n as f64),
                Figure::Real(x) => obj.set(name, x),
                Figure::Flag(b) => obj.set(name, b),
                Figure::Text(t) => obj.set(name, t),
                Figure::Key(k) => obj.set(name, Buffer::from(k.to_vec())),
                Figure::Path(p) => obj.set(name, p.to_string_lossy().into_owned()),
                Figure::Lines(l) => obj.set(name, l),
                Figure::Time(t) => obj.set(name, unix_seconds(t) * 1000.0),
                Figure::Span(d) => obj.set(name + "Ms", d.as_secs_f64() * 1000.0),
                Figure::Absent => obj.set(name, Null),
                Figure::Record(inner) => obj.set(name, Js(inner)),
                _ => Err(Error::new(
                    Status::GenericFailure,
                    format!("INTERNAL: {kind}.{name} is a figure this binding does not know"),
                )),
            }?;
        }
        Ok(obj.raw())
    }
}
