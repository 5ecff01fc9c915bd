//! A one-line progress indicator on stderr for long commands (`import`,
//! `backup`, `compact`), drawn only when stderr is a terminal: redirected
//! or captured output (scripts, tests, logs) never sees it.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Least time between two redraws.
const REDRAW: Duration = Duration::from_millis(100);
/// A command done sooner than this draws nothing (no flicker).
const QUIET_START: Duration = Duration::from_millis(300);

/// The progress line of one command.
pub struct Progress {
    label: &'static str,
    enabled: bool,
    started: Instant,
    drawn: Option<Instant>,
}

impl Progress {
    /// A line labelled `label`, drawn only if stderr is a terminal.
    pub fn new(label: &'static str) -> Progress {
        Progress {
            label,
            enabled: std::io::stderr().is_terminal(),
            started: Instant::now(),
            drawn: None,
        }
    }

    /// Redraws the line with `text` (at most every [`REDRAW`]).
    pub fn update(&mut self, text: impl FnOnce() -> String) {
        if !self.enabled
            || self.started.elapsed() < QUIET_START
            || self.drawn.is_some_and(|t| t.elapsed() < REDRAW)
        {
            return;
        }
        self.drawn = Some(Instant::now());
        let secs = self.started.elapsed().as_secs_f64();
        let mut err = std::io::stderr().lock();
        // \r back to the line's start, \x1b[K clears what a longer line left.
        let _ = write!(err, "\r{}: {} ({secs:.0} s)\x1b[K", self.label, text());
        let _ = err.flush();
    }

    /// Prints `line` on stderr above the progress line.
    pub fn note(&mut self, line: &str) {
        self.clear();
        eprintln!("{line}");
    }

    /// Removes the line (before the command's own output).
    pub fn clear(&mut self) {
        if self.enabled && self.drawn.take().is_some() {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
        }
    }

    /// Runs `work` with the line showing the time it has taken so far
    /// (`text` in front), for a call that reports no progress of its own.
    pub fn around<T>(label: &'static str, text: String, work: impl FnOnce() -> T) -> T {
        let mut line = Progress::new(label);
        if !line.enabled {
            return work();
        }
        let done = Arc::new(AtomicBool::new(false));
        let ticker = {
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                while !done.load(Ordering::Acquire) {
                    line.update(|| text.clone());
                    std::thread::park_timeout(REDRAW);
                }
                line.clear();
            })
        };
        let out = work();
        done.store(true, Ordering::Release);
        ticker.thread().unpark();
        let _ = ticker.join();
        out
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}
