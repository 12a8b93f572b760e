//! How a watch waits before it tries again after an error: short, capped delays with
//! jitter, so that every watch is back within about two seconds of the API server's
//! return, however long it was away.
//!
//! kube-rs' `default_backoff()` (client-go's: 0.8 s doubling to 30 s, jittered up to
//! twice as long) suits a struggling API server, but after an outage of half a minute
//! it left each watch asleep for up to 25 s more, one kind after another: the
//! controller served changes made meanwhile a quarter of a minute late. A failing
//! connection attempt costs the API server next to nothing, so the delay here stops
//! growing at [`MAX_DELAY`]; each delay is drawn between half and all of its value, so
//! that the replicas of a Deployment (and the watches of one replica) do not come back
//! in step. The delays start again from [`FIRST_DELAY`] as soon as the watch receives
//! anything (kube-rs resets the backoff on every event).

use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

use kube::runtime::utils::Backoff;

/// The first delay after an error.
pub const FIRST_DELAY: Duration = Duration::from_millis(200);
/// The longest delay: the most a watch lags behind the API server's return.
pub const MAX_DELAY: Duration = Duration::from_secs(2);

/// Delays doubling from [`FIRST_DELAY`] up to [`MAX_DELAY`], each drawn uniformly
/// between half and all of its value.
#[derive(Debug, Clone)]
pub struct WatchBackoff {
    next: Duration,
    jitter: RandomState,
    draws: u64,
}

impl Default for WatchBackoff {
    fn default() -> Self {
        Self {
            next: FIRST_DELAY,
            jitter: RandomState::new(),
            draws: 0,
        }
    }
}

impl WatchBackoff {
    /// A number in `[0, 1)`, different at every draw and for every backoff.
    fn random_fraction(&mut self) -> f64 {
        self.draws += 1;
        let bits = self.jitter.hash_one(self.draws) >> 11;
        bits as f64 / (1u64 << 53) as f64
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.next;
        self.next = (delay * 2).min(MAX_DELAY);
        let fraction = 0.5 + self.random_fraction() / 2.0;
        Some(delay.mul_f64(fraction))
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = FIRST_DELAY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_stay_under_the_ceiling_and_start_again_after_a_reset() {
        let mut backoff = WatchBackoff::default();
        let delays: Vec<Duration> = backoff.by_ref().take(40).collect();
        assert!(delays.iter().all(|d| *d <= MAX_DELAY));
        assert!(delays[0] >= FIRST_DELAY / 2 && delays[0] <= FIRST_DELAY);
        // After a long outage the delays sit between half the ceiling and the ceiling.
        assert!(delays[10..].iter().all(|d| *d >= MAX_DELAY / 2));
        backoff.reset();
        assert!(backoff.next().is_some_and(|d| d <= FIRST_DELAY));
    }

    #[test]
    fn delays_are_spread_so_that_replicas_do_not_retry_in_step() {
        let a: Vec<Duration> = WatchBackoff::default().skip(10).take(20).collect();
        let b: Vec<Duration> = WatchBackoff::default().skip(10).take(20).collect();
        assert_ne!(a, b);
        let distinct: std::collections::BTreeSet<Duration> = a.iter().copied().collect();
        assert!(distinct.len() > 10, "{a:?}");
    }
}
