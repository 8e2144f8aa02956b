//! A QEMU TCG plugin (API version 1, as Debian 12's QEMU 7.2 loads) that counts the
//! instructions the guest executes, per translated block, between two marker
//! instructions the guest runs (`insn-mark`, mark.rs).
//!
//! The marker is the otherwise unused 7-byte NOP `nopl 0x5252000N(%rax)`
//! (`0f 1f 80 0N 00 52 52`): `N = 1` ends an interval and writes its total only,
//! `N = 2` ends it and writes every block that ran in it (`vaddr insns executions`), so
//! the host can split the cost by function. Either way the counters restart at zero.
//!
//! Output (`out=FILE`), one record per interval:
//! ```text
//! interval SEQ total INSNS blocks NBLOCKS
//! b VADDR_HEX INSNS_PER_EXEC EXECUTIONS      (detailed intervals only)
//! end SEQ
//! ```
//! Counting is an inline add per block execution (exact with `-accel tcg,thread=single`,
//! which `-icount` needs anyway). A block that leaves early (an exception in its middle)
//! still counts all its instructions: the figure is a close upper bound, the same for
//! both transports.
//!
//! QEMU 7.2 ships no `qemu-plugin.h`; the few v1 declarations used are written out here.
//! This is host-side tooling, not kernel code, so its FFI is plain `unsafe` Rust.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::Mutex;

type PluginId = u64;
#[repr(C)]
struct QemuPluginTb {
    _opaque: [u8; 0],
}
#[repr(C)]
struct QemuPluginInsn {
    _opaque: [u8; 0],
}
/// `enum qemu_plugin_op`: QEMU_PLUGIN_INLINE_ADD_U64.
const INLINE_ADD_U64: c_int = 0;
/// `enum qemu_plugin_cb_flags`: QEMU_PLUGIN_CB_NO_REGS.
const CB_NO_REGS: c_int = 0;

extern "C" {
    fn qemu_plugin_register_vcpu_tb_trans_cb(
        id: PluginId,
        cb: extern "C" fn(PluginId, *mut QemuPluginTb),
    );
    fn qemu_plugin_register_vcpu_tb_exec_inline(
        tb: *mut QemuPluginTb,
        op: c_int,
        ptr: *mut c_void,
        imm: u64,
    );
    fn qemu_plugin_register_vcpu_insn_exec_cb(
        insn: *mut QemuPluginInsn,
        cb: extern "C" fn(u32, *mut c_void),
        flags: c_int,
        userdata: *mut c_void,
    );
    fn qemu_plugin_register_atexit_cb(
        id: PluginId,
        cb: extern "C" fn(PluginId, *mut c_void),
        userdata: *mut c_void,
    );
    fn qemu_plugin_tb_n_insns(tb: *const QemuPluginTb) -> usize;
    fn qemu_plugin_tb_vaddr(tb: *const QemuPluginTb) -> u64;
    fn qemu_plugin_tb_get_insn(tb: *const QemuPluginTb, idx: usize) -> *mut QemuPluginInsn;
    fn qemu_plugin_insn_data(insn: *const QemuPluginInsn) -> *const u8;
    fn qemu_plugin_insn_size(insn: *const QemuPluginInsn) -> usize;
}

/// The plugin API version this plugin was written against.
#[no_mangle]
pub static qemu_plugin_version: c_int = 1;

/// The marker's bytes without its last four (the tag): `nopl disp32(%rax)`.
const MARK_OPCODE: [u8; 3] = [0x0f, 0x1f, 0x80];
/// The high half of every tag, "RR".
const MARK_MAGIC: u16 = 0x5252;
const MARK_TOTAL: u16 = 1;
const MARK_DETAIL: u16 = 2;

/// One translated block, by its start address and length. Translations of the same
/// code share one record, so its counter is the code's, not the translation's.
struct Block {
    vaddr: u64,
    insns: u64,
    /// Executions in the current interval: QEMU adds one inline on each.
    execs: u64,
}

struct Counter {
    /// Boxed so that the address QEMU adds to stays put while the map grows.
    blocks: HashMap<(u64, u64), Box<Block>>,
    out: BufWriter<File>,
    seq: u64,
}

static COUNTER: Mutex<Option<Counter>> = Mutex::new(None);

fn marker_tag(insn: *const QemuPluginInsn) -> Option<u16> {
    // SAFETY: `insn` is a live handle of the block being translated; its data is
    // `qemu_plugin_insn_size` bytes long.
    let bytes = unsafe {
        let len = qemu_plugin_insn_size(insn);
        if len != 7 {
            return None;
        }
        std::slice::from_raw_parts(qemu_plugin_insn_data(insn), len)
    };
    if bytes[..3] != MARK_OPCODE || u16::from_le_bytes([bytes[5], bytes[6]]) != MARK_MAGIC {
        return None;
    }
    let tag = u16::from_le_bytes([bytes[3], bytes[4]]);
    (tag == MARK_TOTAL || tag == MARK_DETAIL).then_some(tag)
}

extern "C" fn on_translate(_id: PluginId, tb: *mut QemuPluginTb) {
    // SAFETY: `tb` is the block QEMU is translating, valid during this callback.
    let (vaddr, n) = unsafe { (qemu_plugin_tb_vaddr(tb), qemu_plugin_tb_n_insns(tb)) };
    let mut guard = COUNTER.lock().unwrap();
    let Some(counter) = guard.as_mut() else { return };
    let block = counter.blocks.entry((vaddr, n as u64)).or_insert_with(|| {
        Box::new(Block {
            vaddr,
            insns: n as u64,
            execs: 0,
        })
    });
    let execs = &mut block.execs as *mut u64 as *mut c_void;
    // SAFETY: the counter lives in a box that is never freed while QEMU runs, and only
    // the vCPU thread (single-threaded TCG) adds to it.
    unsafe { qemu_plugin_register_vcpu_tb_exec_inline(tb, INLINE_ADD_U64, execs, 1) };
    drop(guard);
    for i in 0..n {
        // SAFETY: `i` is below the block's instruction count.
        let insn = unsafe { qemu_plugin_tb_get_insn(tb, i) };
        if let Some(tag) = marker_tag(insn) {
            // SAFETY: `insn` belongs to the block being translated.
            unsafe {
                qemu_plugin_register_vcpu_insn_exec_cb(
                    insn,
                    on_marker,
                    CB_NO_REGS,
                    tag as usize as *mut c_void,
                )
            };
        }
    }
}

/// Ends the current interval: writes it and sets every counter back to zero.
fn end_interval(counter: &mut Counter, detail: bool) -> std::io::Result<()> {
    let total: u64 = counter.blocks.values().map(|b| b.insns * b.execs).sum();
    let ran = counter.blocks.values().filter(|b| b.execs != 0).count();
    writeln!(counter.out, "interval {} total {total} blocks {ran}", counter.seq)?;
    for b in counter.blocks.values_mut() {
        if detail && b.execs != 0 {
            writeln!(counter.out, "b {:x} {} {}", b.vaddr, b.insns, b.execs)?;
        }
        b.execs = 0;
    }
    writeln!(counter.out, "end {}", counter.seq)?;
    counter.out.flush()?;
    counter.seq += 1;
    Ok(())
}

extern "C" fn on_marker(_vcpu: u32, tag: *mut c_void) {
    let mut guard = COUNTER.lock().unwrap();
    if let Some(counter) = guard.as_mut() {
        if let Err(e) = end_interval(counter, tag as usize as u16 == MARK_DETAIL) {
            eprintln!("insn-count: cannot write the interval: {e}");
        }
    }
}

extern "C" fn on_exit(_id: PluginId, _data: *mut c_void) {
    let mut guard = COUNTER.lock().unwrap();
    if let Some(counter) = guard.as_mut() {
        // The tail after the last marker (shutdown), totals only.
        let _ = end_interval(counter, false);
    }
}

/// Called by QEMU when it loads the plugin: `-plugin FILE,arg=out=PATH` (QEMU 7.2
/// passes `arg=` values through as `argv`).
///
/// # Safety
/// QEMU passes `argc` valid C strings in `argv`.
#[no_mangle]
pub unsafe extern "C" fn qemu_plugin_install(
    id: PluginId,
    _info: *const c_void,
    argc: c_int,
    argv: *const *const c_char,
) -> c_int {
    let mut path = None;
    for i in 0..argc as usize {
        // SAFETY: the caller passes `argc` valid strings.
        let arg = unsafe { CStr::from_ptr(*argv.add(i)) }.to_string_lossy();
        if let Some(p) = arg.strip_prefix("out=") {
            path = Some(p.to_string());
        }
    }
    let Some(path) = path else {
        eprintln!("insn-count: needs out=FILE");
        return -1;
    };
    let file = match File::create(&path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("insn-count: cannot create {path}: {e}");
            return -1;
        }
    };
    *COUNTER.lock().unwrap() = Some(Counter {
        blocks: HashMap::new(),
        out: BufWriter::new(file),
        seq: 0,
    });
    // SAFETY: `id` is ours; the callbacks are `extern "C"` and live as long as the plugin.
    unsafe {
        qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
        qemu_plugin_register_atexit_cb(id, on_exit, std::ptr::null_mut());
    }
    0
}
