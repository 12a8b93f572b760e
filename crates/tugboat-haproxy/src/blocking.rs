//! The one way to run blocking work (file I/O, a large render) from async code: on
//! tokio's blocking threads, so that the runtime's few workers go on with the watches
//! and the admin server meanwhile.
//!
//! The house rule "no `std::fs` in async code" is a lint: the workspace's `clippy.toml`
//! refuses the `std::fs` calls everywhere except in the modules whose file work runs
//! here (or before the runtime starts).

/// Runs `work` on a blocking thread and waits for it. Move what `work` needs into the
/// closure and hand it back in the result, rather than cloning it.
///
/// A panic of `work` is raised again here, as if `work` had run in place.
pub async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        // The work panicked: the same panic, here.
        Err(err) => std::panic::resume_unwind(err.into_panic()),
    }
}

/// Runs `work` on `state` on a blocking thread and hands `state` back with the result:
/// the state moves to the thread and back instead of being cloned.
pub async fn blocking_with<S, T>(
    mut state: S,
    work: impl FnOnce(&mut S) -> T + Send + 'static,
) -> (S, T)
where
    S: Send + 'static,
    T: Send + 'static,
{
    blocking(move || {
        let value = work(&mut state);
        (state, value)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hands_back_what_the_work_returns() {
        let moved = vec![1, 2, 3];
        let (back, sum) = blocking(move || {
            let sum: i32 = moved.iter().sum();
            (moved, sum)
        })
        .await;
        assert_eq!((back, sum), (vec![1, 2, 3], 6));
    }

    #[tokio::test]
    async fn hands_the_state_back_with_the_result() {
        let (state, len) = blocking_with(vec![1, 2], |state| {
            state.push(3);
            state.len()
        })
        .await;
        assert_eq!((state, len), (vec![1, 2, 3], 3));
    }

    #[tokio::test]
    #[should_panic(expected = "the work's own panic")]
    async fn raises_the_panic_of_the_work_again() {
        blocking(|| panic!("the work's own panic")).await
    }
}
