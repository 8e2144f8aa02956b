// SPDX-License-Identifier: GPL-2.0

//! Controllers (`struct nvmet_ctrl`): borrowed in the core's callbacks, compared by
//! identity elsewhere.

use super::bindings;
use kernel::types::Opaque;

/// A controller the nvmet core lends to a callback.
#[repr(transparent)]
pub(crate) struct Ctrl(Opaque<bindings::nvmet_ctrl>);

impl Ctrl {
    /// The controller at `ptr`, for the duration of a callback.
    ///
    /// # Safety
    ///
    /// `ptr` is a live controller for `'a`: the core passes one to the callback that
    /// calls this.
    pub(super) unsafe fn from_raw<'a>(ptr: *const bindings::nvmet_ctrl) -> &'a Self {
        // SAFETY: `Ctrl` is a transparent wrapper of the controller, live for `'a` (see
        // the function's safety section).
        unsafe { &*ptr.cast::<Self>() }
    }

    /// Whether the controller was created with T10-PI (its port's `param_pi_enable` and a
    /// transport that offers metadata).
    pub(crate) fn pi_support(&self) -> bool {
        // SAFETY: the controller is live (`from_raw`); `pi_support` is set before the
        // controller is handed to a transport and not changed afterwards.
        unsafe { (*self.0.get()).pi_support }
    }
}

/// A controller's identity: its address, only compared, never followed (it may be gone).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct CtrlId(usize);

impl CtrlId {
    /// The identity of the controller at `ptr` (which is not dereferenced).
    pub(super) fn from_raw(ptr: *const bindings::nvmet_ctrl) -> Self {
        Self(ptr as usize)
    }
}
