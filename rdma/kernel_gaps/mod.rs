// SPDX-License-Identifier: GPL-2.0

//! Kernel-crate gap fillers: what the project needs from 7.2's `rust/kernel/` and does not
//! find there. None of it is RDMA; it lives under `rdma/` because the layers are the only
//! place `unsafe` may be written, and each module compiles the layer in. Each file names
//! the upstream API that would replace it:
//!
//! | file | what it offers | replaced by, upstream |
//! |---|---|---|
//! | `param.rs` | string, bool, bounded-int and global-rkey module parameters | typed parameters in `module!` (7.2 offers integers only) |
//! | `clock.rs` | `Stamp`: the CPU's cycle counter (`get_cycles`), and its calibration against the monotonic clock | a `get_cycles` binding in `kernel::time` (7.2 offers `ktime_get` only, 50 to 100 instructions a read) |
//! | `debugfs_check.rs` | whether a debugfs entry was created | none by design (the kernel's `debugfs` hides failures); a module driven only through debugfs keeps it |
//! | `once.rs` | `PublishOnce<T>`: `SetOnce` on a `core` atomic | `kernel::sync::SetOnce`, once `kernel::sync::atomic` inlines on gcc-built kernels (its loads are out-of-line C helpers today) |
//! | `workqueue.rs` | an owned queue (`alloc_workqueue`, destroyed on drop); the flush of a delayed work item | an owned queue type and `DelayedWork` flush/disable in `kernel::workqueue` |
//! | `percpu_gate.rs` | `PercpuGate`: a gate passed without a locked instruction (a `percpu_ref`), closed by waiting for those inside | a `percpu_ref` abstraction (none in 7.2's kernel crate) |
//! | `slot.rs` | `Slot<T>`/`Owner`: a state passed between steps by hand-off and resume | nothing upstream yet: the blk-mq `Request` state machine is the nearest model |

use super::bindings;

pub(crate) mod clock;
pub(crate) mod debugfs_check;
pub(crate) mod once;
pub(crate) mod param;
pub(crate) mod percpu_gate;
pub(crate) mod slot;
pub(crate) mod workqueue;
