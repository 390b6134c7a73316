//! Blocking work from actors: the one way the runtime runs SQLite, tantivy, usearch, the embedding model and file
//! reads without stalling the async executor.
//!
//! An actor that owns a blocking resource keeps it in an `Option`; [`with_taken`] moves it onto tokio's blocking
//! pool for one piece of work and puts it back. The actor still handles one message at a time, so every reply
//! reflects every earlier message, on a multi-threaded and a current-thread runtime alike. Work that panics takes
//! the resource with it: the actor fails on that message, and any later one is told the resource was lost.

use ractor::ActorProcessingErr;

/// Runs `work` on the blocking pool; a panic in it becomes the actor's error.
pub(crate) async fn run<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, ActorProcessingErr> {
    Ok(tokio::task::spawn_blocking(work).await?)
}

/// Runs `work` on the blocking pool with the resource in `slot` (`what` names it in the error when an earlier
/// panic lost it), and puts the resource back.
pub(crate) async fn with_taken<S: Send + 'static, T: Send + 'static>(
    slot: &mut Option<S>,
    what: &str,
    work: impl FnOnce(&mut S) -> T + Send + 'static,
) -> Result<T, ActorProcessingErr> {
    let mut resource = slot.take().ok_or_else(|| format!("{what} was lost by an earlier failed task"))?;
    let (resource, result) = run(move || {
        let result = work(&mut resource);
        (resource, result)
    })
    .await?;
    *slot = Some(resource);
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn the_resource_comes_back_and_a_panic_loses_it_for_good() {
        let mut slot = Some(vec![1, 2]);
        let n = with_taken(&mut slot, "the list", |list| {
            list.push(3);
            list.len()
        })
        .await
        .expect("work");
        assert_eq!((n, slot.as_deref()), (3, Some(&[1, 2, 3][..])));
        let failed = with_taken(&mut slot, "the list", |_| -> () { panic!("boom") }).await;
        assert!(failed.is_err(), "a panic is the actor's error");
        assert!(slot.is_none(), "the resource went down with the task");
        let err = with_taken(&mut slot, "the list", |list| list.len()).await.expect_err("lost");
        assert!(err.to_string().contains("the list was lost"), "{err}");
    }
}
