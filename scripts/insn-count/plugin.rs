//! A QEMU TCG plugin (API version 1, as Debian 12's QEMU 7.2 loads) that counts the
//! instructions the guest executes, per translated block, between two marker
//! instructions the guest runs (`insn-mark`, mark.rs), and attributes the guest kernel's
//! instructions to the call chain they ran under (frames.rs).
//!
//! The marker is the otherwise unused 7-byte NOP `nopl 0x5252000N(%rax)`
//! (`0f 1f 80 0N 00 52 52`): `N = 1` ends an interval and writes its totals, `N = 2` ends
//! it and also writes every block that ran in it (`vaddr insns executions locked`), so the
//! host can split the cost by function. Either way the counters restart at zero.
//!
//! Output (`out=FILE`), one record per interval:
//! ```text
//! interval SEQ total INSNS blocks NBLOCKS
//! b VADDR_HEX INSNS_PER_EXEC EXECUTIONS LOCKED_PER_EXEC   (detailed intervals only)
//! n NODE PARENT FUNC_HEX                                  (call-chain nodes first made)
//! c NODE INSNS LOCKED
//! end SEQ
//! ```
//! `c` records count the guest kernel's instructions by the call chain they ran under:
//! `NODE` names a module function entered by a call (`FUNC`) below its caller's node
//! (`PARENT`), and counts its own code and the kernel-image helpers it calls; 0 is the
//! root (a new thread, or code entered before the count began), and an interrupt's
//! entry starts a chain of its own. The host classifies the nodes by module
//! (scripts/transport_cost.py).
//! `LOCKED` counts the block's atomic read-modify-write instructions (a `lock` prefix,
//! or `xchg` with memory, which is locked without one).
//!
//! Counting the totals is an inline add per block execution (exact with
//! `-accel tcg,thread=single`, which `-icount` needs anyway); the chains take a callback
//! per block execution. A block that leaves early (an exception in its middle) still
//! counts all its instructions: the figure is a close upper bound, the same for both
//! transports.
//!
//! `syms=System.map` names the kernel's interrupt and exception entries and its context
//! switch (`__switch_to_asm`), where the call chain starts again (frames.rs), and the
//! end of the kernel image (`_end`), above which code is modules'.
//!
//! QEMU 7.2 ships no `qemu-plugin.h`; the few v1 declarations used are written out here.
//! This is host-side tooling, not kernel code, so its FFI is plain `unsafe` Rust.

mod decode;
mod frames;
mod hash;

use decode::Exit;
use frames::Frames;
use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};

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
    fn qemu_plugin_register_vcpu_tb_exec_cb(
        tb: *mut QemuPluginTb,
        cb: extern "C" fn(u32, *mut c_void),
        flags: c_int,
        userdata: *mut c_void,
    );
    fn qemu_plugin_register_vcpu_insn_exec_cb(
        insn: *mut QemuPluginInsn,
        cb: extern "C" fn(u32, *mut c_void),
        flags: c_int,
        userdata: *mut c_void,
    );
    fn qemu_plugin_reset(id: PluginId, cb: extern "C" fn(PluginId));
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
    fn qemu_plugin_insn_vaddr(insn: *const QemuPluginInsn) -> u64;
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

/// Addresses from here up are the kernel's; below, user space (not attributed).
const KERNEL_START: u64 = 0xffff_8000_0000_0000;

/// What a block's first instruction is, for the call chain.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Entry {
    /// Ordinary code.
    Code,
    /// An interrupt or exception entry: what runs until its `iret` is not the interrupted
    /// code's.
    Interrupt,
    /// The context switch: the next thread's chain is not this one's.
    Switch,
}

/// One translated block, by its start address and length. Translations of the same
/// code share one record, so its counter is the code's, not the translation's.
struct Block {
    vaddr: u64,
    insns: u64,
    /// Executions in the current interval: QEMU adds one inline on each.
    execs: u64,
    /// Atomic read-modify-write instructions in the block.
    locked: u64,
    /// How the block ends (a call, a return, an `iret`, anything else).
    exit: Exit,
    entry: Entry,
}

struct Counter {
    /// Boxed so that the address QEMU adds to stays put while the vector grows.
    blocks: Vec<Box<Block>>,
    by_code: HashMap<(u64, u64), usize>,
    /// The interrupt and exception entries and the context switch, from `syms=`.
    entries: HashMap<u64, Entry>,
    frames: Frames,
    /// Instructions and locked instructions run under each chain node, this interval (by
    /// node number).
    chains: Vec<(u64, u64)>,
    /// Kernel block executions since the plugin loaded (for the progress line).
    kernel_execs: u64,
    /// Whether blocks translated now follow the call chain: from the first marker on (the
    /// guest's boot, before it, runs many times the windows' blocks, and a callback per
    /// block would make it several times slower).
    chained: bool,
    id: PluginId,
    /// Nodes written so far (they are numbered in order of creation).
    nodes_written: usize,
    out: BufWriter<File>,
    seq: u64,
}

/// The plugin's state. QEMU runs this plugin's callbacks on its one TCG thread
/// (`thread=single`), or at exit once the vCPU stopped: never two at once.
struct Global(UnsafeCell<Option<Counter>>);
// SAFETY: see the type's documentation: the callbacks never run concurrently.
unsafe impl Sync for Global {}
static COUNTER: Global = Global(UnsafeCell::new(None));

/// The plugin's state.
///
/// # Safety
///
/// Only from QEMU's callbacks (never concurrent), and the reference is not kept across
/// calls.
unsafe fn counter() -> Option<&'static mut Counter> {
    // SAFETY: the caller's promise.
    unsafe { (*COUNTER.0.get()).as_mut() }
}

/// The instruction's bytes.
///
/// # Safety
///
/// `insn` is a live handle of the block being translated.
unsafe fn insn_bytes<'a>(insn: *const QemuPluginInsn) -> &'a [u8] {
    // SAFETY: the caller's promise; its data is `qemu_plugin_insn_size` bytes long.
    unsafe {
        std::slice::from_raw_parts(qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn))
    }
}

fn marker_tag(bytes: &[u8]) -> Option<u16> {
    if bytes.len() != 7
        || bytes[..3] != MARK_OPCODE
        || u16::from_le_bytes([bytes[5], bytes[6]]) != MARK_MAGIC
    {
        return None;
    }
    let tag = u16::from_le_bytes([bytes[3], bytes[4]]);
    (tag == MARK_TOTAL || tag == MARK_DETAIL).then_some(tag)
}

extern "C" fn on_translate(_id: PluginId, tb: *mut QemuPluginTb) {
    // SAFETY: `tb` is the block QEMU is translating, valid during this callback.
    let (vaddr, n) = unsafe { (qemu_plugin_tb_vaddr(tb), qemu_plugin_tb_n_insns(tb)) };
    // SAFETY: a QEMU callback.
    let Some(counter) = (unsafe { counter() }) else { return };
    let mut locked = 0;
    let mut exit = Exit::Other;
    for i in 0..n {
        // SAFETY: `i` is below the block's instruction count; `insn` belongs to the block
        // being translated.
        let (insn, bytes) = unsafe {
            let insn = qemu_plugin_tb_get_insn(tb, i);
            (insn, insn_bytes(insn))
        };
        locked += decode::is_locked(bytes) as u64;
        if i + 1 == n {
            // SAFETY: as above.
            let next = unsafe { qemu_plugin_insn_vaddr(insn) } + bytes.len() as u64;
            exit = decode::exit(bytes, next);
        }
        if let Some(tag) = marker_tag(bytes) {
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
    let entry = *counter.entries.get(&vaddr).unwrap_or(&Entry::Code);
    let next = counter.blocks.len();
    let index = *counter.by_code.entry((vaddr, n as u64)).or_insert(next);
    if index == next {
        counter.blocks.push(Box::new(Block {
            vaddr,
            insns: n as u64,
            execs: 0,
            locked,
            exit,
            entry,
        }));
    }
    let execs = &mut counter.blocks[index].execs as *mut u64 as *mut c_void;
    // SAFETY: the counter lives in a box that is never freed while QEMU runs, and only
    // the vCPU thread (single-threaded TCG) adds to it.
    unsafe { qemu_plugin_register_vcpu_tb_exec_inline(tb, INLINE_ADD_U64, execs, 1) };
    if vaddr >= KERNEL_START && counter.chained {
        // SAFETY: the callback is `extern "C"` and lives as long as the plugin.
        unsafe {
            qemu_plugin_register_vcpu_tb_exec_cb(tb, on_exec, CB_NO_REGS, index as *mut c_void)
        };
    }
}

/// A kernel block runs: follow the call chain, and count the block under it.
extern "C" fn on_exec(_vcpu: u32, index: *mut c_void) {
    // SAFETY: a QEMU callback.
    let Some(counter) = (unsafe { counter() }) else { return };
    let index = index as usize;
    let block = &*counter.blocks[index];
    let node = match block.entry {
        Entry::Code => counter.frames.enter(block.vaddr),
        Entry::Interrupt => counter.frames.interrupt(block.vaddr),
        Entry::Switch => counter.frames.switch(block.vaddr),
    };
    counter.frames.leave(block.exit);
    if counter.frames.naming {
        let node = node as usize;
        if node >= counter.chains.len() {
            counter.chains.resize(node + 1, (0, 0));
        }
        counter.chains[node].0 += block.insns;
        counter.chains[node].1 += block.locked;
    }
    counter.kernel_execs += 1;
    if counter.kernel_execs % (1 << 27) == 0 {
        eprintln!(
            "insn-count: {} kernel blocks run, {} chain nodes, depth {}, {} counters",
            counter.kernel_execs,
            counter.frames.node_count(),
            counter.frames.depth(),
            counter.chains.len()
        );
    }
}

/// Ends the current interval: writes it and sets every counter back to zero.
fn end_interval(counter: &mut Counter, detail: bool) -> std::io::Result<()> {
    let total: u64 = counter.blocks.iter().map(|b| b.insns * b.execs).sum();
    let ran = counter.blocks.iter().filter(|b| b.execs != 0).count();
    writeln!(counter.out, "interval {} total {total} blocks {ran}", counter.seq)?;
    for b in counter.blocks.iter_mut() {
        if detail && b.execs != 0 {
            writeln!(counter.out, "b {:x} {} {} {}", b.vaddr, b.insns, b.execs, b.locked)?;
        }
        b.execs = 0;
    }
    for (id, parent, func) in counter.frames.nodes_from(counter.nodes_written) {
        writeln!(counter.out, "n {id} {parent} {func:x}")?;
    }
    counter.nodes_written = counter.frames.node_count();
    for (node, (insns, locked)) in counter.chains.iter_mut().enumerate() {
        if *insns != 0 {
            writeln!(counter.out, "c {node} {insns} {locked}")?;
        }
        (*insns, *locked) = (0, 0);
    }
    // From the first marker on, chains are followed, named and counted (the guest's boot
    // is over): the blocks translated so far go, and come back with the chain's callback.
    if !counter.chained {
        counter.chained = true;
        counter.frames.naming = true;
        // SAFETY: `id` is ours; `on_reset` is `extern "C"` and lives as long as the plugin.
        unsafe { qemu_plugin_reset(counter.id, on_reset) };
    }
    writeln!(counter.out, "end {}", counter.seq)?;
    counter.out.flush()?;
    counter.seq += 1;
    Ok(())
}

extern "C" fn on_marker(_vcpu: u32, tag: *mut c_void) {
    // SAFETY: a QEMU callback.
    if let Some(counter) = unsafe { counter() } {
        if let Err(e) = end_interval(counter, tag as usize as u16 == MARK_DETAIL) {
            eprintln!("insn-count: cannot write the interval: {e}");
        }
    }
}

/// The translation cache was flushed (`qemu_plugin_reset` dropped every callback): the
/// same callbacks again; blocks are now translated with the chain's.
extern "C" fn on_reset(id: PluginId) {
    // SAFETY: `id` is ours; the callbacks are `extern "C"` and live as long as the plugin.
    unsafe { register(id) };
}

/// Registers the plugin's translation and exit callbacks.
///
/// # Safety
///
/// `id` is the plugin's.
unsafe fn register(id: PluginId) {
    // SAFETY: the caller's promise; the callbacks are `extern "C"` and live as long as the
    // plugin.
    unsafe {
        qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
        qemu_plugin_register_atexit_cb(id, on_exit, std::ptr::null_mut());
    }
}

extern "C" fn on_exit(_id: PluginId, _data: *mut c_void) {
    // SAFETY: a QEMU callback (the vCPU has stopped).
    if let Some(counter) = unsafe { counter() } {
        // The tail after the last marker (shutdown), totals only.
        let _ = end_interval(counter, false);
    }
}

/// The interrupt and exception entries and the context switch of the kernel whose
/// `System.map` is at `path`.
/// Also the end of the kernel image (`_end`): modules' code is above.
fn read_entries(path: &str) -> std::io::Result<(HashMap<u64, Entry>, u64)> {
    let mut entries = HashMap::new();
    let mut end = u64::MAX;
    for line in BufReader::new(File::open(path)?).lines() {
        let line = line?;
        let mut parts = line.split_whitespace();
        let (Some(addr), Some(_kind), Some(name)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if name == "_end" {
            end = u64::from_str_radix(addr, 16).unwrap_or(u64::MAX);
            continue;
        }
        let entry = if name == "__switch_to_asm" || name == "entry_SYSCALL_64" {
            Entry::Switch
        } else if name.starts_with("asm_sysvec_")
            || name.starts_with("asm_exc_")
            || name == "asm_common_interrupt"
            || name == "asm_spurious_interrupt"
        {
            Entry::Interrupt
        } else {
            continue;
        };
        if let Ok(addr) = u64::from_str_radix(addr, 16) {
            entries.insert(addr, entry);
        }
    }
    Ok((entries, end))
}

/// Called by QEMU when it loads the plugin: `-plugin FILE,arg=out=PATH,arg=syms=MAP`
/// (QEMU 7.2 passes `arg=` values through as `argv`).
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
    let (mut path, mut syms) = (None, None);
    for i in 0..argc as usize {
        // SAFETY: the caller passes `argc` valid strings.
        let arg = unsafe { CStr::from_ptr(*argv.add(i)) }.to_string_lossy();
        if let Some(p) = arg.strip_prefix("out=") {
            path = Some(p.to_string());
        } else if let Some(p) = arg.strip_prefix("syms=") {
            syms = Some(p.to_string());
        }
    }
    let Some(path) = path else {
        eprintln!("insn-count: needs out=FILE");
        return -1;
    };
    let (entries, modules_start) = match syms.as_deref().map(read_entries).transpose() {
        Ok(read) => read.unwrap_or((HashMap::new(), u64::MAX)),
        Err(e) => {
            eprintln!("insn-count: cannot read the kernel's symbols: {e}");
            return -1;
        }
    };
    if !entries.values().any(|e| *e == Entry::Switch) {
        eprintln!("insn-count: no syms=System.map (with __switch_to_asm): chains cross threads");
    }
    let file = match File::create(&path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("insn-count: cannot create {path}: {e}");
            return -1;
        }
    };
    // SAFETY: QEMU calls no callback of the plugin before it is installed.
    unsafe {
        *COUNTER.0.get() = Some(Counter {
            blocks: Vec::new(),
            by_code: HashMap::new(),
            entries,
            frames: {
                let mut frames = Frames::new(modules_start);
                // (named from the first marker on: see `end_interval`)
                frames.naming = false;
                frames
            },
            chains: Vec::new(),
            kernel_execs: 0,
            chained: false,
            id,
            nodes_written: 0,
            out: BufWriter::new(file),
            seq: 0,
        })
    };
    // SAFETY: `id` is ours.
    unsafe { register(id) };
    0
}
