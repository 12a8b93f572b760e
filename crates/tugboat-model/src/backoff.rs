//! How every retry waits: delays that double from a first one up to a ceiling. Pure
//! (durations only); the callers sleep.

use std::time::Duration;

/// Delays that double from `first` up to `max`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub const fn new(first: Duration, max: Duration) -> Self {
        Self {
            first,
            max,
            next: first,
        }
    }

    /// The delay to wait now; the one after doubles, up to the ceiling.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (delay * 2).min(self.max);
        delay
    }

    /// The delay [`Backoff::next_delay`] would give, without moving on.
    pub fn peek(&self) -> Duration {
        self.next
    }

    /// Back to the first delay (after a success).
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_ceiling_and_resets() {
        let mut backoff = Backoff::new(Duration::from_millis(10), Duration::from_millis(50));
        let delays: Vec<u64> = (0..5)
            .map(|_| backoff.next_delay().as_millis() as u64)
            .collect();
        assert_eq!(delays, [10, 20, 40, 50, 50]);
        backoff.reset();
        assert_eq!(backoff.peek(), Duration::from_millis(10));
    }
}
