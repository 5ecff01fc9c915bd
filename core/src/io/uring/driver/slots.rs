//! The slot table: one slot per operation in the ring, owning its buffer
//! until the completion is reaped (D1), its waker and how it waits, and
//! per runtime the waiter holding the reactor registration (D3).

use std::task::Waker;

use crate::io::AlignedBuf;

/// What an operation is waiting through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Not waiting yet (or a blocking caller in `io_uring_enter`).
    Unset,
    /// The reactor of the tokio runtime with this id.
    Reactor(tokio::runtime::Id),
    /// The fallback completion thread.
    Fallback,
    /// A foreign event loop that watches the eventfd and reaps when it is
    /// readable ([`Driver::complete`](super::Driver::complete)).
    Loop,
}

pub(super) enum Slot {
    Free,
    InFlight {
        waker: Option<Waker>,
        mode: Mode,
        buf: Option<AlignedBuf>,
    },
    Done {
        res: i32,
        buf: Option<AlignedBuf>,
        mode: Mode,
    },
    /// The future was dropped while the kernel owned the buffer (D1).
    Abandoned {
        _buf: Option<AlignedBuf>,
    },
}

#[derive(Default)]
pub(super) struct Slots {
    pub(super) slots: Vec<Slot>,
    /// Generation of each slot, bumped at every reuse and carried in the
    /// high half of the entry's user data, so that a completion can only
    /// ever reach the operation it was submitted for.
    pub(super) gens: Vec<u32>,
    pub(super) free: Vec<usize>,
    /// Slots not `Free`.
    pub(super) busy: usize,
    /// Per runtime, the reactor waiter holding its registration (D3).
    pub(super) registrants: Vec<(tokio::runtime::Id, usize)>,
    /// Operations waiting through the fallback thread.
    pub(super) fallback_waiters: usize,
}

/// User data of an entry: generation in the high half, slot in the low.
pub(super) fn user_data(id: usize, gen: u32) -> u64 {
    (u64::from(gen) << 32) | id as u64
}

impl Slots {
    /// A fresh slot owning `buf`: its index and the user data for its entry.
    pub(super) fn insert(&mut self, buf: Option<AlignedBuf>) -> (usize, u64) {
        let slot = Slot::InFlight {
            waker: None,
            mode: Mode::Unset,
            buf,
        };
        self.busy += 1;
        let id = match self.free.pop() {
            Some(i) => {
                debug_assert!(matches!(self.slots.get(i), Some(Slot::Free)));
                if let Some(s) = self.slots.get_mut(i) {
                    *s = slot;
                }
                if let Some(g) = self.gens.get_mut(i) {
                    *g = g.wrapping_add(1);
                }
                i
            }
            None => {
                self.slots.push(slot);
                self.gens.push(0);
                self.slots.len() - 1
            }
        };
        (id, user_data(id, self.gens.get(id).copied().unwrap_or(0)))
    }

    pub(super) fn release(&mut self, i: usize) {
        if let Some(s) = self.slots.get_mut(i) {
            *s = Slot::Free;
            self.free.push(i);
            self.busy -= 1;
        }
    }

    /// A waiter of runtime `rt`'s reactor other than `except`, to take
    /// over the registration: its slot and waker.
    pub(super) fn other_reactor_waiter(
        &self,
        rt: tokio::runtime::Id,
        except: usize,
    ) -> Option<(usize, Waker)> {
        self.slots.iter().enumerate().find_map(|(i, s)| match s {
            Slot::InFlight {
                waker: Some(w),
                mode: Mode::Reactor(r),
                ..
            } if *r == rt && i != except => Some((i, w.clone())),
            _ => None,
        })
    }

    /// The runtime whose registration `id` holds, if any.
    pub(super) fn registered_runtime(&self, id: usize) -> Option<tokio::runtime::Id> {
        self.registrants
            .iter()
            .find(|(_, r)| *r == id)
            .map(|(rt, _)| *rt)
    }

    /// Names `id` (or nobody) the registrant of runtime `rt`.
    pub(super) fn set_registrant(&mut self, rt: tokio::runtime::Id, id: Option<usize>) {
        self.registrants.retain(|(r, _)| *r != rt);
        if let Some(id) = id {
            self.registrants.push((rt, id));
        }
    }
}
