//! Waiting on the cluster: the one polling loop behind every test helper that
//! waits for an object to reach a state.

use std::time::{Duration, Instant};

/// How often a wait reads again: often enough that a test does not idle,
/// rarely enough that the reads are no load on the API server.
pub const EVERY: Duration = Duration::from_millis(200);

/// Reads with `read` every [`EVERY`] until a value passes `check`, and returns
/// it; after `timeout`, the last value read (`None`: there was none) is the
/// error, for the caller to say what it saw.
pub async fn until<T, Read, Reading>(
    timeout: Duration,
    mut read: Read,
    check: impl Fn(&T) -> bool,
) -> Result<T, Option<T>>
where
    Read: FnMut() -> Reading,
    Reading: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match read().await {
            Some(value) if check(&value) => return Ok(value),
            last if Instant::now() > deadline => return Err(last),
            _ => tokio::time::sleep(EVERY).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_the_first_value_that_passes() {
        let mut n = 0;
        let read = || {
            n += 1;
            std::future::ready(Some(n))
        };
        assert_eq!(
            until(Duration::from_secs(5), read, |v| *v >= 3).await,
            Ok(3)
        );
    }

    #[tokio::test]
    async fn gives_up_with_the_last_value_read() {
        let read = || std::future::ready(Some(1));
        let last = until(Duration::from_millis(300), read, |v| *v > 1).await;
        assert_eq!(last, Err(Some(1)));
        let never = until(Duration::ZERO, || std::future::ready(None::<u8>), |_| true).await;
        assert_eq!(never, Err(None));
    }
}
