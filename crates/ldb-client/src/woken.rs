//! A future that is polled again only when it woke its task.
//!
//! Why: a stream task is polled once per socket read, and `select!` polls
//! every branch each time. The cell's cancellation future is one
//! `tokio::sync::Notify` shared by all streams of a cell, and polling a
//! pending `Notified` takes that `Notify`'s lock: a thousand streams on two
//! worker threads take one shared lock per token, only to learn that nothing
//! was cancelled. Wrapped in [`WokenOnly`], the inner future is polled on
//! the first poll, when the task's waker changed, and after its own waker
//! fired; otherwise the wrapper answers `Pending` at the cost of one atomic
//! swap and a waker comparison. (`FuturesUnordered` does the same for its
//! futures; this is that idea for a single one.)

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// What the inner future wakes: it marks itself woken and wakes the task.
struct Flag {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// `inner`, polled only when it asked to be (see the module note).
pub(crate) struct WokenOnly<F> {
    inner: F,
    flag: Arc<Flag>,
    /// The waker handed to `inner`.
    own: Waker,
    /// The task's waker of the last poll that reached `inner`.
    last_task: Option<Waker>,
}

impl<F: Future + Unpin> WokenOnly<F> {
    pub(crate) fn new(inner: F) -> Self {
        let flag = Arc::new(Flag {
            woken: AtomicBool::new(false),
            task: AtomicWaker::new(),
        });
        WokenOnly {
            inner,
            own: Waker::from(flag.clone()),
            flag,
            last_task: None,
        }
    }
}

impl<F: Future + Unpin> Future for WokenOnly<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let same_task = this
            .last_task
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()));
        // A plain load first: the usual answer is "not woken", and it then
        // costs no read-modify-write.
        let woken = this.flag.woken.load(Ordering::Acquire)
            && this.flag.woken.swap(false, Ordering::AcqRel);
        if same_task && !woken {
            // Not woken since the last poll: the task's waker is still
            // registered (only a wake takes it out).
            return Poll::Pending;
        }
        // (Re-)register before polling `inner`: whatever `inner` waits for
        // after this poll wakes the task through it. A wake that landed
        // between the swap and here is for something `inner` now sees.
        this.flag.task.register(cx.waker());
        if !same_task {
            this.last_task = Some(cx.waker().clone());
        }
        Pin::new(&mut this.inner).poll(&mut Context::from_waker(&this.own))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio_util::sync::CancellationToken;

    #[tokio::test]
    async fn a_cancellation_while_waiting_is_seen() {
        let token = CancellationToken::new();
        let t2 = token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            t2.cancel();
        });
        let wait = std::pin::pin!(token.cancelled());
        let mut w = WokenOnly::new(wait);
        // Other wake-ups of the task (a ticking interval) must not hide it.
        let mut tick = tokio::time::interval(Duration::from_millis(1));
        let mut ticks = 0;
        loop {
            tokio::select! {
                biased;
                _ = &mut w => break,
                _ = tick.tick() => ticks += 1,
            }
        }
        assert!(ticks > 3, "the task was woken by other things meanwhile");
    }

    #[tokio::test]
    async fn already_cancelled_is_ready_at_once() {
        let token = CancellationToken::new();
        token.cancel();
        let wait = std::pin::pin!(token.cancelled());
        let w = WokenOnly::new(wait);
        tokio::time::timeout(Duration::from_secs(5), w)
            .await
            .expect("ready");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancellation_from_another_thread_under_load_is_never_lost() {
        for _ in 0..200 {
            let token = CancellationToken::new();
            let t2 = token.clone();
            let waiter = tokio::spawn(async move {
                let wait = std::pin::pin!(token.cancelled());
                let mut w = WokenOnly::new(wait);
                loop {
                    tokio::select! {
                        biased;
                        _ = &mut w => return,
                        _ = tokio::task::yield_now() => {}
                    }
                }
            });
            tokio::task::yield_now().await;
            t2.cancel();
            tokio::time::timeout(Duration::from_secs(5), waiter)
                .await
                .expect("the cancellation was seen")
                .expect("task");
        }
    }
}
