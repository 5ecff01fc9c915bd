//! Leader/follower group commit: the queue of changes and the lead.
//!
//! A change is queued with its reply channel; its caller leads if nobody
//! does, or waits to be told. The lead passes explicitly, to the caller of
//! the oldest change still queued. Invariants kept here: at most one
//! holder of the lead at a time (so one writer of metadata); the group in
//! progress lives in the lead, not in the leader's future, so a leader
//! dropped half way leaves it for the next holder, who finishes it before
//! anything else (invariant 1); a summons whose caller is gone is passed
//! on, so a queued change never waits for nobody.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::channel::oneshot;
use parking_lot::Mutex;

use super::maintenance::Maintenance;
use super::Committer;
use crate::error::{Error, ErrorKind};
use crate::store::request::{fail_request, Request};

/// Most requests folded into one group.
const MAX_GROUP: usize = 1024;
/// Groups a caller leads after the one holding its own change, while
/// changes are queued, before it passes the lead on. The next group then
/// starts as soon as the last one is durable, rather than when the
/// summoned caller is next scheduled (measured, 16 writers of 16 KiB
/// durable puts: 1.17–1.19 × the puts per second of passing the lead on
/// at once; 3 more groups gained less). The caller's own reply waits for
/// that one group longer.
const LEAD_ONE_MORE: usize = 1;

/// The group in progress, driven by whoever holds the lead.
type GroupFuture = Pin<Box<dyn Future<Output = Box<Committer>> + Send>>;

/// What the lead holds.
pub(super) enum Lead {
    /// Nobody is committing: the next leader starts a group.
    Idle(Box<Committer>),
    /// A group is being committed; whoever holds the lead drives it on (its
    /// first leader may have been dropped half way).
    Busy(GroupFuture),
    /// Closed: the committer finished.
    Closed,
}

impl Lead {
    /// Drives a group in progress to its end. Cancel-safe: dropped half
    /// way, the group stays here for the next holder.
    async fn settle(&mut self) {
        if let Lead::Busy(group) = self {
            let committer = group.as_mut().await;
            *self = Lead::Idle(committer);
        }
    }
}

/// A queued change and the way to tell its caller to lead.
struct Queued {
    req: Request,
    /// Taken when the caller is told to lead (or when it was).
    lead: Option<oneshot::Sender<()>>,
}

struct Queue {
    requests: VecDeque<Queued>,
    /// Somebody holds the lead (or has been told to take it).
    leading: bool,
    closed: bool,
}

/// The commit path: the request queue and the lead (leader/follower group
/// commit, see the module doc).
///
/// The lead passes explicitly: a leader that is done hands it to the
/// caller of the oldest change still queued, so the next group starts at
/// once, without waking callers whose changes were in the group just
/// committed.
pub(crate) struct CommitPath {
    queue: Mutex<Queue>,
    /// The committer, out of here while a leader holds it (`Leading`).
    lead: Mutex<Option<Lead>>,
    pub(super) maintenance: Arc<Maintenance>,
}

/// Whether a caller leads now or waits to be told.
pub(crate) enum Role {
    Leader,
    Follower(oneshot::Receiver<()>),
}

/// The lead, out of the path while its holder uses it. Dropped (done, or
/// with its holder's future cancelled half way), it puts the lead back,
/// group in progress included, and passes it on (`CommitPath::release`).
pub(super) struct Leading<'a> {
    pub(super) path: &'a CommitPath,
    pub(super) lead: Option<Lead>,
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        *self.path.lead.lock() = self.lead.take();
        self.path.release();
    }
}

/// A follower's summons to lead. Dropped before it is acted on (the
/// caller's future cancelled), a summons already sent is passed on.
struct Summons<'a> {
    path: &'a CommitPath,
    rx: oneshot::Receiver<()>,
}

impl Drop for Summons<'_> {
    fn drop(&mut self) {
        // No summons can arrive after this; one that did is passed on.
        self.rx.close();
        if let Ok(Some(())) = self.rx.try_recv() {
            self.path.release();
        }
    }
}

impl CommitPath {
    pub(crate) fn new(committer: Committer, maintenance: Arc<Maintenance>) -> CommitPath {
        CommitPath {
            queue: Mutex::new(Queue {
                requests: VecDeque::new(),
                leading: false,
                closed: false,
            }),
            lead: Mutex::new(Some(Lead::Idle(Box::new(committer)))),
            maintenance,
        }
    }

    /// Queues a change: its caller leads now if nobody does, or waits to be
    /// told. Gives the change back once the path is closed.
    #[expect(
        clippy::result_large_err,
        reason = "the refused request goes back by value, once, after close"
    )]
    pub(crate) fn push(&self, req: Request) -> std::result::Result<Role, Request> {
        let mut q = self.queue.lock();
        if q.closed {
            return Err(req);
        }
        if !q.leading {
            q.leading = true;
            q.requests.push_back(Queued { req, lead: None });
            return Ok(Role::Leader);
        }
        let (tx, rx) = oneshot::channel();
        q.requests.push_back(Queued {
            req,
            lead: Some(tx),
        });
        Ok(Role::Follower(rx))
    }

    /// Passes the lead on: to the caller of the oldest queued change that
    /// still waits, else nobody (the maintenance thread is poked when a
    /// group was left in progress).
    fn release(&self) {
        let mut q = self.queue.lock();
        for queued in q.requests.iter_mut() {
            if let Some(tx) = queued.lead.take() {
                if tx.send(()).is_ok() {
                    return;
                }
            }
        }
        q.leading = false;
        drop(q);
        let left = matches!(*self.lead.lock(), Some(Lead::Busy(_)));
        let queued = !self.queue.lock().requests.is_empty();
        if left || queued {
            // A group left half way, or changes whose callers are gone.
            self.maintenance.poke();
        }
    }

    /// Takes the lead out of the path (the caller was told it leads).
    fn take_lead(&self) -> Leading<'_> {
        Leading {
            path: self,
            lead: self.lead.lock().take(),
        }
    }

    /// Waits for the reply to a queued change, leading groups when told
    /// to. `None` when the store closed without answering.
    pub(crate) async fn wait<T>(&self, role: Role, mut reply: oneshot::Receiver<T>) -> Option<T> {
        let fresh = matches!(role, Role::Leader);
        let summons = match role {
            Role::Leader => None,
            Role::Follower(rx) => Some(Summons { path: self, rx }),
        };
        if let Some(mut summons) = summons {
            let told = futures::future::select(&mut reply, &mut summons.rx).await;
            match told {
                futures::future::Either::Left((r, _)) => return r.ok(),
                futures::future::Either::Right((Ok(()), _)) => {
                    // Acted on: nothing to pass on when it drops.
                    summons.rx.close();
                    drop(summons);
                }
                futures::future::Either::Right((Err(_), _)) => {
                    // The path dropped the summons (closed): the reply
                    // says how the change ended.
                    drop(summons);
                    return reply.await.ok();
                }
            }
        }
        {
            let mut leading = self.take_lead();
            if fresh && crate::io::polled_by_a_loop() {
                // On an event loop, the changes its callers issue in one
                // turn (500 puts from one tick of JavaScript, a `gather`
                // in asyncio) are queued by the tasks the loop polls after
                // this one: the lead waits for that round, so they commit
                // as one group rather than this change alone first (500
                // durable puts from Node: two groups, the first of one
                // put). Dropped meanwhile, `leading` passes the lead on.
                YieldOnce(false).await;
            }
            if let Some(lead) = leading.lead.as_mut() {
                self.lead_groups(lead, LEAD_ONE_MORE).await;
            }
        }
        reply.await.ok()
    }

    /// With the lead held: finishes the group in progress, then commits
    /// what is queued as one group, and again while changes deferred by
    /// it remain (so a deferred change never waits for another caller),
    /// and up to `more` times again while changes are queued.
    pub(super) async fn lead_groups(&self, lead: &mut Lead, mut more: usize) {
        while self.lead_one(lead).await {
            let deferred = matches!(lead, Lead::Idle(c) if !c.deferred.is_empty());
            if deferred {
                continue;
            }
            if more > 0 && !self.queue.lock().requests.is_empty() {
                more -= 1;
                continue;
            }
            break;
        }
    }

    /// One group: finishes the group in progress, then commits what is
    /// queued (deferred changes first). Whether a group ran.
    async fn lead_one(&self, lead: &mut Lead) -> bool {
        lead.settle().await;
        let Lead::Idle(committer) = std::mem::replace(lead, Lead::Closed) else {
            return false;
        };
        let mut committer = committer;
        let mut batch: Vec<Request> = committer.deferred.drain(..).collect();
        {
            let mut q = self.queue.lock();
            let take = q.requests.len().min(MAX_GROUP.saturating_sub(batch.len()));
            batch.extend(q.requests.drain(..take).map(|queued| queued.req));
        }
        if batch.is_empty() {
            *lead = Lead::Idle(committer);
            return false;
        }
        *lead = Lead::Busy(Box::pin(async move {
            committer.commit_group(batch).await;
            committer
        }));
        lead.settle().await;
        true
    }

    /// Takes the lead if nobody holds it.
    pub(super) fn try_lead(&self) -> Option<Leading<'_>> {
        let mut q = self.queue.lock();
        if q.leading {
            return None;
        }
        q.leading = true;
        drop(q);
        Some(self.take_lead())
    }

    /// Refuses new changes, commits everything queued, writes what is
    /// open and marks the clean close. Idempotent.
    pub(crate) fn close(&self) {
        self.queue.lock().closed = true;
        // Wait for the lead (a caller may hold it for a last group).
        let mut leading = loop {
            if let Some(l) = self.try_lead() {
                break l;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        crate::io::block_on(async {
            if let Some(lead) = leading.lead.as_mut() {
                while self.lead_one(lead).await {}
                if let Lead::Idle(c) = lead {
                    c.finish().await;
                }
                *lead = Lead::Closed;
            }
        });
        drop(leading);
        // Whatever is still queued fails (nothing can be, once closed and
        // drained; kept for safety).
        let left: Vec<Queued> = self.queue.lock().requests.drain(..).collect();
        let e = Error::new(ErrorKind::Closed, "the store is closed");
        left.into_iter().for_each(|q| fail_request(q.req, &e));
    }
}

/// Pending once (waking its task at once), then ready: lets the loop poll
/// its other ready tasks in between.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}
