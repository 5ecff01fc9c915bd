//! One store's [`EventLoop`] hosted on Node's own libuv loop.
//!
//! A [`Host`] belongs to one JavaScript `Store` and lives on the JavaScript
//! thread. It watches each descriptor of [`EventLoop::fds`] with a libuv
//! `uv_poll_t` on the loop of the environment (`napi_get_uv_event_loop`);
//! when one is readable, the poll callback runs [`EventLoop::run`] inside a
//! napi handle scope and a callback scope, so the promises it settles have
//! their reactions (microtasks) run right after, as after any other I/O
//! callback. A call ([`Host::spawn`]) creates a napi deferred, spawns the
//! engine future (polled once at once: its I/O is submitted from this
//! thread) and settles the deferred from the task's `done` callback, on
//! this thread. No thread between the kernel's completion and the promise.
//!
//! Invariants (H1–H5):
//! * H1. Everything here is touched on the JavaScript thread only. The
//!   `done` callbacks and their futures live in the `EventLoop`, which only
//!   the `Host` holds and which spawns, polls, cancels and drops tasks only
//!   where it is called: always this thread (the `Send` bounds `spawn` asks
//!   for are met by [`JsThread`], a promise of this).
//! * H2. The poll handles are referenced (keep the process alive) exactly
//!   while a task is pending, so an idle open store lets Node exit, and a
//!   pending promise keeps it running until it settles.
//! * H3. While a task is pending, every descriptor is watched (the
//!   `EventLoop`'s L3): closing (`close()`, or the JavaScript `Store`
//!   collected) only marks the host; the handles are closed when the last
//!   pending task finishes. Only the environment's teardown closes them
//!   with tasks pending (their futures are dropped; nothing is left to
//!   settle their promises for).
//! * H4. A handle's memory is freed by its close callback, never before
//!   (libuv owns it from `uv_close` until then); each handle, and the
//!   environment cleanup hook, owns one `Rc` of the host, released when the
//!   handle is closed or the hook removed.
//! * H5. No panic leaves an `extern "C"` callback (each catches), and no
//!   `done` callback panics (settling catches), so `EventLoop::run` never
//!   unwinds part way through a round.
#![allow(unsafe_code)]

use std::alloc::Layout;
use std::cell::{Cell, RefCell};
use std::ffi::{c_int, c_void};
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::rc::Rc;
use std::sync::Arc;

use engine::event_loop::EventLoop;
use napi::bindgen_prelude::{Error, JsError, Result, Status, ToNapiValue};
use napi::sys;

/// `UV_POLL` of libuv's `uv_handle_type` (stable since libuv 1.0).
const UV_POLL: c_int = 8;
/// `UV_READABLE` of libuv's `uv_poll_event`.
const UV_READABLE: c_int = 1;

type PollCb = unsafe extern "C" fn(handle: *mut c_void, status: c_int, events: c_int);
type CloseCb = unsafe extern "C" fn(handle: *mut c_void);

// libuv, as exported by the node binary that loads this addon. Handles are
// opaque here: sized with `uv_handle_size`, their user data set and read
// through the accessors, so no struct layout is assumed.
extern "C" {
    fn uv_handle_size(kind: c_int) -> usize;
    fn uv_poll_init(lp: *mut sys::uv_loop_s, handle: *mut c_void, fd: c_int) -> c_int;
    fn uv_poll_start(handle: *mut c_void, events: c_int, cb: PollCb) -> c_int;
    fn uv_poll_stop(handle: *mut c_void) -> c_int;
    fn uv_close(handle: *mut c_void, cb: CloseCb);
    fn uv_ref(handle: *mut c_void);
    fn uv_unref(handle: *mut c_void);
    fn uv_handle_set_data(handle: *mut c_void, data: *mut c_void);
    fn uv_handle_get_data(handle: *const c_void) -> *mut c_void;
}

fn poll_layout() -> Option<Layout> {
    // SAFETY: a pure function of its argument.
    let size = unsafe { uv_handle_size(UV_POLL) };
    Layout::from_size_align(size.max(1), 16).ok()
}

/// A value that is only ever used on the JavaScript thread (H1), so that
/// it may sit in the `Send` callbacks the `EventLoop` keeps.
pub(crate) struct JsThread<T>(pub(crate) T);

// SAFETY: see H1; every `JsThread` is created, used and dropped on the
// JavaScript thread.
unsafe impl<T> Send for JsThread<T> {}

impl<T> JsThread<T> {
    /// The value (a method, so that closures capture the whole wrapper,
    /// not its `!Send` fields).
    pub(crate) fn into_inner(self) -> T {
        self.0
    }
}

/// A promise made by [`Host::spawn`], handed to JavaScript as it is.
pub struct Promise(sys::napi_value);

impl napi::bindgen_prelude::TypeName for Promise {
    fn type_name() -> &'static str {
        "Promise"
    }

    fn value_type() -> napi::ValueType {
        napi::ValueType::Object
    }
}

impl ToNapiValue for Promise {
    unsafe fn to_napi_value(_env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
        Ok(val.0)
    }
}

fn check(status: sys::napi_status, what: &str) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(Error::new(
            Status::GenericFailure,
            format!("IO: {what} failed ({status})"),
        ))
    }
}

fn uv_check(rc: c_int, what: &str) -> Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(Error::new(
            Status::GenericFailure,
            format!("IO: {what} failed (libuv error {rc})"),
        ))
    }
}

/// The host of one store's [`EventLoop`] on the environment's libuv loop.
pub(crate) struct Host {
    env: sys::napi_env,
    /// `None` once shut down. Cloned out before every `spawn`/`run`, so no
    /// borrow is held while tasks run (their callbacks may close the host).
    ev: RefCell<Option<Arc<EventLoop>>>,
    /// Poll handles (libuv memory, see H4), one per descriptor.
    polls: RefCell<Vec<*mut c_void>>,
    /// Tasks spawned and not finished (H2).
    pending: Cell<usize>,
    /// `close()` was called or the store collected: no new calls, shut
    /// down when `pending` reaches 0 (H3).
    closing: Cell<bool>,
    /// The async context the poll callback's callback scope runs in, and
    /// the resource object it was made for.
    context: Cell<sys::napi_async_context>,
    resource: Cell<sys::napi_ref>,
    /// The `Rc` the environment cleanup hook holds (null once removed).
    hook: Cell<*const Host>,
}

impl Host {
    /// A host for `store` on `env`'s loop. Its handles start unreferenced.
    pub(crate) fn new(env: sys::napi_env, store: &engine::Store) -> Result<Rc<Host>> {
        let ev = EventLoop::new(store).map_err(crate::errors::js_err)?;
        let host = Rc::new(Host {
            env,
            ev: RefCell::new(Some(Arc::new(ev))),
            polls: RefCell::new(Vec::new()),
            pending: Cell::new(0),
            closing: Cell::new(false),
            context: Cell::new(ptr::null_mut()),
            resource: Cell::new(ptr::null_mut()),
            hook: Cell::new(ptr::null()),
        });
        // On failure part way, what was set up is torn down again.
        if let Err(e) = Host::start(&host) {
            host.shut_down();
            return Err(e);
        }
        Ok(host)
    }

    fn start(host: &Rc<Host>) -> Result<()> {
        let env = host.env;
        let layout =
            poll_layout().ok_or_else(|| Error::from_reason("IO: uv_handle_size(UV_POLL)"))?;
        let mut lp = ptr::null_mut();
        // SAFETY: `env` is the live environment of the calling JS thread.
        check(
            unsafe { sys::napi_get_uv_event_loop(env, &mut lp) },
            "napi_get_uv_event_loop",
        )?;
        let fds = match host.ev.borrow().as_ref() {
            Some(ev) => ev.fds(),
            None => Vec::new(),
        };
        for fd in fds {
            // SAFETY: a non-zero size, checked by `Layout`.
            let handle = unsafe { std::alloc::alloc(layout) }.cast::<c_void>();
            if handle.is_null() {
                return Err(Error::from_reason("IO: out of memory for a uv_poll_t"));
            }
            // SAFETY: `handle` is fresh memory of `uv_handle_size(UV_POLL)`
            // bytes, `lp` the loop of this thread.
            if let Err(e) = uv_check(unsafe { uv_poll_init(lp, handle, fd) }, "uv_poll_init") {
                // Never initialized: libuv does not know it, free it here.
                // SAFETY: allocated above with this layout.
                unsafe { std::alloc::dealloc(handle.cast(), layout) };
                return Err(e);
            }
            // From here the handle is closed and freed by `shut_down` (H4),
            // and owns one `Rc` of the host through its data.
            // SAFETY: an initialized handle; the data is an owned `Rc`.
            unsafe {
                uv_handle_set_data(handle, Rc::into_raw(host.clone()) as *mut c_void);
                uv_unref(handle);
            }
            host.polls.borrow_mut().push(handle);
            // SAFETY: an initialized handle of this loop.
            uv_check(
                unsafe { uv_poll_start(handle, UV_READABLE, on_readable) },
                "uv_poll_start",
            )?;
        }
        // The callback scope's async context.
        let mut resource = ptr::null_mut();
        let mut name = ptr::null_mut();
        let mut context = ptr::null_mut();
        let mut reference = ptr::null_mut();
        // SAFETY: plain napi calls on the JS thread, inside the handle
        // scope of the call that created the host.
        unsafe {
            check(
                sys::napi_create_object(env, &mut resource),
                "napi_create_object",
            )?;
            check(
                sys::napi_create_string_utf8(env, c"blobcask".as_ptr(), 8, &mut name),
                "napi_create_string_utf8",
            )?;
            check(
                sys::napi_create_reference(env, resource, 1, &mut reference),
                "napi_create_reference",
            )?;
            host.resource.set(reference);
            check(
                sys::napi_async_init(env, resource, name, &mut context),
                "napi_async_init",
            )?;
            host.context.set(context);
            let hook = Rc::into_raw(host.clone());
            host.hook.set(hook);
            check(
                sys::napi_add_env_cleanup_hook(env, Some(on_env_teardown), hook as *mut c_void),
                "napi_add_env_cleanup_hook",
            )?;
        }
        Ok(())
    }

    /// Starts `future` on the loop and returns a promise that `future`'s
    /// output settles: `Ok` resolves with its JavaScript value, `Err`
    /// rejects with it (a panic rejects with an INTERNAL error).
    /// `make` builds the future from the store's `EventLoop` (whose
    /// `read_op`/`put_op` decide where a transfer runs).
    pub(crate) fn spawn<T, F>(
        self: &Rc<Self>,
        make: impl FnOnce(&EventLoop) -> F,
    ) -> Result<Promise>
    where
        T: ToNapiValue + Send + 'static,
        F: Future<Output = Result<T>> + Send + 'static,
    {
        let ev = self.ev.borrow().clone();
        let Some(ev) = ev.filter(|_| !self.closing.get()) else {
            return Err(closed());
        };
        let future = make(&ev);
        let env = self.env;
        let mut deferred = ptr::null_mut();
        let mut promise = ptr::null_mut();
        // SAFETY: a napi call on the JS thread, inside the caller's scope.
        check(
            unsafe { sys::napi_create_promise(env, &mut deferred, &mut promise) },
            "napi_create_promise",
        )?;
        self.started();
        let me = JsThread((self.clone(), env, deferred));
        // H5: `settle` catches; `finished` only touches cells and libuv.
        ev.spawn(future, move |out| {
            let (host, env, deferred) = me.into_inner();
            settle(env, deferred, out);
            host.finished();
        });
        Ok(Promise(promise))
    }

    /// `close()` or the store collected: no new calls; shut down now when
    /// idle, else when the last pending task finishes (H3).
    pub(crate) fn close(&self) {
        self.closing.set(true);
        if self.pending.get() == 0 {
            self.shut_down();
        }
    }

    fn started(&self) {
        let n = self.pending.get();
        self.pending.set(n + 1);
        if n == 0 {
            // H2: a pending task keeps the process alive.
            for &h in self.polls.borrow().iter() {
                // SAFETY: a handle not yet closed (`polls` is emptied by
                // `shut_down` before they are).
                unsafe { uv_ref(h) };
            }
        }
    }

    fn finished(&self) {
        let n = self.pending.get().saturating_sub(1);
        self.pending.set(n);
        if n == 0 {
            for &h in self.polls.borrow().iter() {
                // SAFETY: as in `started`.
                unsafe { uv_unref(h) };
            }
            if self.closing.get() {
                self.shut_down();
            }
        }
    }

    /// The poll callback's work: one turn of the loop in a handle scope and
    /// a callback scope (closing it runs the microtasks of the promises
    /// settled in the turn).
    fn turn(&self) {
        let ev = self.ev.borrow().clone();
        let Some(ev) = ev else { return };
        let env = self.env;
        let mut handles = ptr::null_mut();
        // SAFETY: napi calls on the JS thread from a libuv callback, where
        // no scope is open: we open both and close them in reverse order.
        unsafe {
            if sys::napi_open_handle_scope(env, &mut handles) != sys::Status::napi_ok {
                return;
            }
            let mut resource = ptr::null_mut();
            sys::napi_get_reference_value(env, self.resource.get(), &mut resource);
            let mut scope = ptr::null_mut();
            let opened =
                sys::napi_open_callback_scope(env, resource, self.context.get(), &mut scope)
                    == sys::Status::napi_ok;
            // H5: `run` resumes panics of callbacks, and ours do not panic.
            let _ = catch_unwind(AssertUnwindSafe(|| ev.run()));
            if opened {
                sys::napi_close_callback_scope(env, scope);
            }
            sys::napi_close_handle_scope(env, handles);
        }
    }

    /// Stops watching: closes the poll handles (freed in their close
    /// callbacks), destroys the async context, removes the cleanup hook and
    /// drops the `EventLoop` (and with it any task still pending: only at
    /// environment teardown, H3). Idempotent.
    fn shut_down(&self) {
        self.closing.set(true);
        let ev = self.ev.borrow_mut().take();
        let polls = std::mem::take(&mut *self.polls.borrow_mut());
        for h in polls {
            // SAFETY: initialized handles of this loop, closed once (taken
            // out of `polls`); `on_closed` frees them (H4).
            unsafe {
                uv_poll_stop(h);
                uv_close(h, on_closed);
            }
        }
        let env = self.env;
        // SAFETY: napi calls on the JS thread; each value is used once and
        // reset to null.
        unsafe {
            let context = self.context.replace(ptr::null_mut());
            if !context.is_null() {
                sys::napi_async_destroy(env, context);
            }
            let resource = self.resource.replace(ptr::null_mut());
            if !resource.is_null() {
                sys::napi_delete_reference(env, resource);
            }
            let hook = self.hook.replace(ptr::null());
            if !hook.is_null() {
                sys::napi_remove_env_cleanup_hook(env, Some(on_env_teardown), hook as *mut c_void);
                // The hook's `Rc` (H4). The caller holds another.
                drop(Rc::from_raw(hook));
            }
        }
        // Last: tasks dropped here may hold `Rc`s of this host.
        drop(ev);
    }
}

/// The rejection for calls on a closed store (the engine's words).
pub(crate) fn closed() -> Error {
    Error::new(Status::GenericFailure, "CLOSED: the store is closed")
}

/// The error for an operation that panicked.
fn panicked(panic: &(dyn std::any::Any + Send)) -> Error {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    Error::new(
        Status::GenericFailure,
        format!("INTERNAL: the operation panicked: {what}"),
    )
}

/// Resolves or rejects `deferred` with `out` (H5: catches its own panics;
/// a value that cannot be made into JavaScript rejects with the reason).
fn settle<T: ToNapiValue>(
    env: sys::napi_env,
    deferred: sys::napi_deferred,
    out: std::thread::Result<Result<T>>,
) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let result = match out {
            Ok(r) => r,
            Err(panic) => Err(panicked(&*panic)),
        };
        // SAFETY: on the JS thread (H1), in a handle scope (the caller's
        // or the poll callback's); `deferred` is settled exactly once: this
        // closure runs once and owns it.
        unsafe {
            let value = result.and_then(|v| T::to_napi_value(env, v));
            match value {
                Ok(v) => {
                    sys::napi_resolve_deferred(env, deferred, v);
                }
                Err(e) => {
                    let v = JsError::from(e).into_value(env);
                    sys::napi_reject_deferred(env, deferred, v);
                }
            }
        }
    }));
}

/// libuv poll callback: one turn of the host's loop (H5).
unsafe extern "C" fn on_readable(handle: *mut c_void, status: c_int, _events: c_int) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the data is the handle's own `Rc` (H4), alive until the
        // close callback; the handle is not closed while it calls us.
        let host = unsafe { &*(uv_handle_get_data(handle) as *const Host) };
        if status < 0 {
            // libuv reports a polling error (not expected for an eventfd)
            // at every turn: stop watching that descriptor rather than
            // spin. Tasks it would have woken then wait for a wake of the
            // other descriptor: a known gap, for a case never seen.
            // SAFETY: a live handle.
            unsafe { uv_poll_stop(handle) };
        }
        host.turn();
    }));
}

/// libuv close callback: frees the handle and its `Rc` of the host (H4).
unsafe extern "C" fn on_closed(handle: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: set in `Host::start` from `Rc::into_raw`, released once.
        unsafe {
            let host = uv_handle_get_data(handle) as *const Host;
            if !host.is_null() {
                drop(Rc::from_raw(host));
            }
        }
        if let Some(layout) = poll_layout() {
            // SAFETY: allocated in `Host::start` with this layout; libuv is
            // done with it once the close callback runs.
            unsafe { std::alloc::dealloc(handle.cast(), layout) };
        }
    }));
}

/// Environment teardown (Node exiting, a worker ending): shut the host
/// down whatever is pending (H3), so no handle outlives the loop.
unsafe extern "C" fn on_env_teardown(arg: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `arg` is the hook's `Rc` (H4): alive until `shut_down`
        // removes the hook and drops it, so hold another one across it.
        let host = unsafe {
            Rc::increment_strong_count(arg as *const Host);
            Rc::from_raw(arg as *const Host)
        };
        host.shut_down();
    }));
}
