// Probe: hole 13 (found with the workqueue SAFETY comment): queues delayed work on a
// module-owned queue, whose timer could outlive the queue's destruction
// expect: E0599

use kernel::{prelude::*, sync::Arc, time::Jiffies, workqueue::DelayedWork};

fn delay_on_owned_queue<T>(queue: &crate::rdma::OwnedQueue, item: Arc<T>, delay: Jiffies)
where
    T: kernel::workqueue::WorkItem<Pointer = Arc<T>>
        + kernel::workqueue::HasDelayedWork<T>
        + Send
        + Sync
        + 'static,
{
    let _ = queue.queue().enqueue_delayed(item, delay);
    let _: Option<&DelayedWork<T>> = None;
}
