// SPDX-License-Identifier: GPL-2.0

//! Whether a debugfs entry exists.
//!
//! The kernel's Rust `debugfs` API does not report a failed creation, by design (debugfs
//! is for debugging, and a driver should work without it). A module that is driven only
//! through its debugfs files has no interface without them, so it looks them up after
//! creating them and fails its load when one is missing.
//!
//! C header: [`include/linux/debugfs.h`](srctree/include/linux/debugfs.h).

use core::ptr;
use kernel::{bindings, prelude::*};

/// Whether `path` (names from the debugfs root down, at least one) exists in debugfs.
pub(crate) fn exists(path: &[&CStr]) -> bool {
    let mut parent: *mut bindings::dentry = ptr::null_mut();
    for name in path {
        // SAFETY: `name` is NUL-terminated; `parent` is null (the debugfs root) or a
        // dentry this loop holds a reference to (taken by the previous lookup).
        let found = unsafe { bindings::debugfs_lookup(name.as_char_ptr(), parent) };
        if !parent.is_null() {
            // SAFETY: the reference to `parent` is this loop's, and it is not used again.
            unsafe { bindings::dput(parent) };
        }
        // Null when missing; an error pointer when debugfs is not built in.
        match kernel::error::from_err_ptr(found) {
            Ok(found) if !found.is_null() => parent = found,
            _ => return false,
        }
    }
    if !parent.is_null() {
        // SAFETY: the reference to `parent` is this function's, and it is not used again.
        unsafe { bindings::dput(parent) };
    }
    !path.is_empty()
}
