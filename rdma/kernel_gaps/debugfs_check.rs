// SPDX-License-Identifier: GPL-2.0

//! Whether a debugfs entry exists.
//!
//! The kernel's Rust `debugfs` API does not report a failed creation, by design (debugfs
//! is for debugging, and a driver should work without it). A module that is driven only
//! through its debugfs files has no interface without them, so it looks them up after
//! creating them and fails its load when one is missing.
//!
//! C header: [`include/linux/debugfs.h`](srctree/include/linux/debugfs.h).

use core::ptr::{self, NonNull};
use kernel::{bindings, prelude::*};

/// A reference to a dentry, from `debugfs_lookup`, put on drop.
struct Dentry(NonNull<bindings::dentry>);

impl Drop for Dentry {
    fn drop(&mut self) {
        // SAFETY: the reference `debugfs_lookup` returned is this value's, and it is not
        // used again.
        unsafe { bindings::dput(self.0.as_ptr()) };
    }
}

/// Whether `path` (names from the debugfs root down, at least one) exists in debugfs.
pub(crate) fn exists(path: &[&CStr]) -> bool {
    let mut parent: Option<Dentry> = None;
    for name in path {
        let parent_ptr = parent.as_ref().map_or(ptr::null_mut(), |d| d.0.as_ptr());
        // SAFETY: `name` is NUL-terminated; `parent_ptr` is null (the debugfs root) or a
        // dentry `parent` holds a reference to (taken by the previous lookup).
        let found = unsafe { bindings::debugfs_lookup(name.as_char_ptr(), parent_ptr) };
        // Null when missing; an error pointer when debugfs is not built in. Replacing
        // `parent` puts its reference.
        match kernel::error::from_err_ptr(found).map(NonNull::new) {
            Ok(Some(found)) => parent = Some(Dentry(found)),
            _ => return false,
        }
    }
    !path.is_empty()
}
