// SPDX-License-Identifier: GPL-2.0

//! Module parameters that `module!` does not offer (it takes plain integers only):
//!
//! - `string_param!(addr, 64, "", "listen address")`: a read-only (0444) string of at
//!   most 63 bytes, backed by the kernel's `param_ops_string`, read through a
//!   [`StringParam`] named `addr`;
//! - `bool_param!(use_srq, false, "use SRQs")`: a read-only boolean (`y`/`n`/`1`/`0`),
//!   backed by `param_ops_bool`, read through a [`BoolParam`];
//! - `int_param_at_least!(srq_size, 1024, 256, "SRQ size")`: a writable (0644) integer
//!   that refuses values below the minimum with `EINVAL` and one log line, read through
//!   an [`IntParam`];
//! - `global_rkey_param!(unsafe_global_rkey, "expose all memory")`: a read-only boolean,
//!   default `n`, read through a [`GlobalRkeyParam`](super::GlobalRkeyParam), whose
//!   `opt_in` yields the token a PD with the device-wide DMA rkey needs: the only way
//!   to get one.
//!
//! Values given at load are set before `init` runs.

use core::sync::atomic::{AtomicI32, Ordering::Relaxed};
use kernel::prelude::*;

/// The storage of a string module parameter: a NUL-terminated byte buffer that the
/// kernel's `param_ops_string` writes once, before the module's `init`.
pub(crate) struct StringParam<const N: usize> {
    buffer: core::cell::UnsafeCell<[u8; N]>,
}

// SAFETY: the kernel writes the buffer only while parsing the module's arguments, before
// `init` runs and before any Rust code can read it; afterwards it is read-only (0444).
unsafe impl<const N: usize> Sync for StringParam<N> {}

impl<const N: usize> StringParam<N> {
    /// A parameter whose default is `default` (at most `N - 1` bytes).
    pub(crate) const fn new(default: &str) -> Self {
        let mut buffer = [0u8; N];
        let bytes = default.as_bytes();
        assert!(bytes.len() < N, "default too long");
        let mut i = 0;
        while i < bytes.len() {
            buffer[i] = bytes[i];
            i += 1;
        }
        Self {
            buffer: core::cell::UnsafeCell::new(buffer),
        }
    }

    /// The value, without its NUL terminator.
    pub(crate) fn value(&self) -> &[u8] {
        // SAFETY: see the `Sync` implementation: no writer exists once module code runs.
        let bytes = unsafe { &*self.buffer.get() };
        let len = bytes.iter().position(|&b| b == 0).unwrap_or(N);
        &bytes[..len]
    }

    /// The buffer, for the `kparam_string` that describes it to the kernel.
    pub(crate) const fn as_mut_ptr(&self) -> *mut c_char {
        self.buffer.get().cast()
    }
}

/// A `struct kparam_string` in a `static`: it points at a [`StringParam`]'s buffer.
#[repr(transparent)]
pub(crate) struct KparamString(kernel::bindings::kparam_string);

// SAFETY: the struct itself is never written after compilation; the buffer it points to
// is synchronised as `StringParam` explains.
unsafe impl Sync for KparamString {}

impl KparamString {
    /// Describes `param` to the kernel: `maxlen` is the buffer size, NUL included.
    pub(crate) const fn new<const N: usize>(param: &'static StringParam<N>) -> Self {
        Self(kernel::bindings::kparam_string {
            maxlen: N as u32,
            string: param.as_mut_ptr(),
        })
    }

    /// The pointer for `kernel_param.str_`.
    pub(crate) const fn as_ptr(&self) -> *const kernel::bindings::kparam_string {
        core::ptr::from_ref(&self.0)
    }
}

/// The storage of a boolean module parameter, written by `param_ops_bool` before `init`.
pub(crate) struct BoolParam {
    value: core::cell::UnsafeCell<bool>,
}

// SAFETY: as for `StringParam`: written only while the module's arguments are parsed,
// before any Rust code runs; read-only (0444) afterwards.
unsafe impl Sync for BoolParam {}

impl BoolParam {
    /// A parameter whose default is `default`.
    pub(crate) const fn new(default: bool) -> Self {
        Self {
            value: core::cell::UnsafeCell::new(default),
        }
    }

    /// The value.
    pub(crate) fn get(&self) -> bool {
        // SAFETY: see the `Sync` implementation.
        unsafe { *self.value.get() }
    }

    /// The storage, for `kernel_param.arg`.
    pub(crate) const fn as_arg(&self) -> *mut core::ffi::c_void {
        self.value.get().cast()
    }
}

/// The storage of a writable integer module parameter: the kernel's `param_get_int` reads
/// it as an `int` (same layout), and the checked setter stores it atomically, so a value
/// written through sysfs while the module runs is read whole.
#[repr(transparent)]
pub(crate) struct IntParam {
    value: AtomicI32,
}

impl IntParam {
    /// A parameter whose default is `default`.
    pub(crate) const fn new(default: i32) -> Self {
        Self {
            value: AtomicI32::new(default),
        }
    }

    /// The current value.
    pub(crate) fn get(&self) -> i32 {
        self.value.load(Relaxed)
    }

    /// The storage, for `kernel_param.arg`.
    pub(crate) const fn as_arg(&self) -> *mut core::ffi::c_void {
        self.value.as_ptr().cast()
    }

    /// The checked setter of [`int_param_at_least!`]: parses `val` and stores it if it is
    /// at least `min`; otherwise logs why and fails with `EINVAL`.
    ///
    /// # Safety
    ///
    /// `val` is a NUL-terminated string and `kp` the parameter, whose `arg` is the
    /// `as_arg` of an `IntParam` in a `static` (as the kernel calls a `set` operation).
    pub(crate) unsafe fn set_at_least(
        val: *const c_char,
        kp: *const kernel::bindings::kernel_param,
        min: i32,
    ) -> core::ffi::c_int {
        let mut n: core::ffi::c_int = 0;
        // SAFETY: `val` is a valid C string (the caller's promise); `n` is writable.
        let parsed = unsafe { kernel::bindings::kstrtoint(val, 10, &mut n) };
        // SAFETY: as above; the name is the parameter's static C string.
        let (text, name) = unsafe {
            (
                CStr::from_char_ptr(val).to_str().unwrap_or("?"),
                CStr::from_char_ptr((*kp).name).to_str().unwrap_or("?"),
            )
        };
        if parsed != 0 || n < min {
            pr_err!(
                "{}={}: must be a number of at least {}\n",
                name,
                text.trim(),
                min
            );
            return EINVAL.to_errno();
        }
        // SAFETY: `arg` is the `as_arg` of a static `IntParam` (the caller's promise).
        let param = unsafe { &*(*kp).__bindgen_anon_1.arg.cast::<IntParam>() };
        param.value.store(n, Relaxed);
        0
    }
}

/// A `struct kernel_param_ops` in a `static`.
#[repr(transparent)]
pub(crate) struct ParamOps(pub(crate) kernel::bindings::kernel_param_ops);

// SAFETY: never written after compilation; it holds only function pointers.
unsafe impl Sync for ParamOps {}

/// The `kernel_param` entry and `.modinfo` lines of a parameter (used by the macros
/// below): `$ops` is a `*const kernel_param_ops`, `$arg` the union member initialiser.
#[allow(unused_macros)]
macro_rules! kernel_param_entry {
    ($name:ident, $ops:expr, $perm:literal, $arg:expr, $type:literal, $description:literal) => {
        #[link_section = "__param"]
        #[used(compiler)]
        static KERNEL_PARAM: ::kernel::module_param::KernelParam =
            ::kernel::module_param::KernelParam::new(::kernel::bindings::kernel_param {
                name: ::kernel::str::as_char_ptr_in_const_context(
                    match ::core::ffi::CStr::from_bytes_with_nul(
                        concat!(stringify!($name), "\0").as_bytes(),
                    ) {
                        Ok(name) => name,
                        Err(_) => panic!("bad parameter name"),
                    },
                ),
                // `__this_module` is set up by the kernel at load time and lives until the
                // module is unloaded, like the parameter.
                mod_: (&raw const ::kernel::bindings::__this_module).cast_mut(),
                ops: $ops,
                perm: $perm,
                level: -1,
                flags: 0,
                __bindgen_anon_1: $arg,
            });

        const PARMTYPE_TEXT: &str = concat!("parmtype=", stringify!($name), ":", $type, "\0");
        #[link_section = ".modinfo"]
        #[used(compiler)]
        static PARMTYPE: [u8; PARMTYPE_TEXT.len()] =
            $crate::rdma::kernel_gaps::param::modinfo_bytes(PARMTYPE_TEXT);

        const PARM_TEXT: &str = concat!("parm=", stringify!($name), ":", $description, "\0");
        #[link_section = ".modinfo"]
        #[used(compiler)]
        static PARM: [u8; PARM_TEXT.len()] =
            $crate::rdma::kernel_gaps::param::modinfo_bytes(PARM_TEXT);
    };
}
#[allow(unused_imports)]
pub(crate) use kernel_param_entry;

/// Copies `text` into a byte array of exactly its length, for `.modinfo` entries.
pub(crate) const fn modinfo_bytes<const N: usize>(text: &str) -> [u8; N] {
    let bytes = text.as_bytes();
    assert!(bytes.len() == N);
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        out[i] = bytes[i];
        i += 1;
    }
    out
}

/// Declares a string module parameter; see the module documentation.
#[allow(unused_macros)]
macro_rules! string_param {
    ($name:ident, $size:literal, $default:literal, $description:literal) => {
        #[allow(non_upper_case_globals)]
        pub(crate) static $name: $crate::rdma::kernel_gaps::param::StringParam<$size> =
            $crate::rdma::kernel_gaps::param::StringParam::new($default);

        // (The layer's own `unsafe`, expanded in the module that declares the parameter.)
        #[allow(unsafe_code)]
        const _: () = {
            static KPARAM_STRING: $crate::rdma::kernel_gaps::param::KparamString =
                $crate::rdma::kernel_gaps::param::KparamString::new(&$name);

            $crate::rdma::kernel_gaps::param::kernel_param_entry!(
                $name,
                // SAFETY: `param_ops_string` is an immutable kernel object.
                unsafe { ::core::ptr::from_ref(&::kernel::bindings::param_ops_string) },
                0o444,
                ::kernel::bindings::kernel_param__bindgen_ty_1 {
                    str_: KPARAM_STRING.as_ptr(),
                },
                "string",
                $description
            );
        };
    };
}
#[allow(unused_imports)]
pub(crate) use string_param;

/// The kernel's entry of a read-only (0444) `bool` module parameter stored in the static
/// `$name` (whose `as_arg` `param_ops_bool` reads): shared by [`bool_param!`] and
/// [`global_rkey_param!`].
// (Not every module declares such parameters.)
#[allow(unused_macros)]
macro_rules! read_only_bool_entry {
    ($name:ident, $description:literal) => {
        // (The layer's own `unsafe`, expanded in the module that declares the parameter.)
        #[allow(unsafe_code)]
        const _: () = {
            $crate::rdma::kernel_gaps::param::kernel_param_entry!(
                $name,
                // SAFETY: `param_ops_bool` is an immutable kernel object.
                unsafe { ::core::ptr::from_ref(&::kernel::bindings::param_ops_bool) },
                0o444,
                ::kernel::bindings::kernel_param__bindgen_ty_1 {
                    arg: $name.as_arg(),
                },
                "bool",
                $description
            );
        };
    };
}
#[allow(unused_imports)]
pub(crate) use read_only_bool_entry;

/// Declares a read-only boolean module parameter; see the module documentation.
#[allow(unused_macros)]
macro_rules! bool_param {
    ($name:ident, $default:literal, $description:literal) => {
        #[allow(non_upper_case_globals)]
        pub(crate) static $name: $crate::rdma::kernel_gaps::param::BoolParam =
            $crate::rdma::kernel_gaps::param::BoolParam::new($default);

        $crate::rdma::kernel_gaps::param::read_only_bool_entry!($name, $description);
    };
}
#[allow(unused_imports)]
pub(crate) use bool_param;

/// Declares a writable integer module parameter with a minimum; see the module
/// documentation.
#[allow(unused_macros)]
macro_rules! int_param_at_least {
    ($name:ident, $default:literal, $min:literal, $description:literal) => {
        #[allow(non_upper_case_globals)]
        pub(crate) static $name: $crate::rdma::kernel_gaps::param::IntParam =
            $crate::rdma::kernel_gaps::param::IntParam::new($default);

        // (The layer's own `unsafe`, expanded in the module that declares the parameter.)
        #[allow(unsafe_code)]
        const _: () = {
            /// The kernel's `set` operation for this parameter.
            ///
            /// # Safety
            ///
            /// Called by the kernel with a C string and this parameter.
            unsafe extern "C" fn set(
                val: *const ::kernel::ffi::c_char,
                kp: *const ::kernel::bindings::kernel_param,
            ) -> ::core::ffi::c_int {
                // SAFETY: the kernel passes a C string and this parameter, whose `arg`
                // is the static `IntParam` above.
                unsafe { $crate::rdma::kernel_gaps::param::IntParam::set_at_least(val, kp, $min) }
            }

            static OPS: $crate::rdma::kernel_gaps::param::ParamOps =
                $crate::rdma::kernel_gaps::param::ParamOps(::kernel::bindings::kernel_param_ops {
                    flags: 0,
                    set: Some(set),
                    get: Some(::kernel::bindings::param_get_int),
                    free: None,
                });

            $crate::rdma::kernel_gaps::param::kernel_param_entry!(
                $name,
                ::core::ptr::from_ref(&OPS.0),
                0o644,
                ::kernel::bindings::kernel_param__bindgen_ty_1 {
                    arg: $name.as_arg(),
                },
                "int",
                $description
            );
        };
    };
}
#[allow(unused_imports)]
pub(crate) use int_param_at_least;

/// Declares the read-only boolean module parameter through which the admin opens PDs'
/// device-wide DMA rkey; see the module documentation.
#[allow(unused_macros)]
macro_rules! global_rkey_param {
    ($name:ident, $description:literal) => {
        // (The layer's own `unsafe`, expanded in the module that declares the parameter.)
        #[allow(non_upper_case_globals, unsafe_code)]
        pub(crate) static $name: $crate::rdma::GlobalRkeyParam =
            // SAFETY: the static is the storage of the 0444 `param_ops_bool` parameter
            // declared below, and nothing else writes it.
            unsafe { $crate::rdma::GlobalRkeyParam::new() };

        $crate::rdma::kernel_gaps::param::read_only_bool_entry!($name, $description);
    };
}
#[allow(unused_imports)]
pub(crate) use global_rkey_param;
