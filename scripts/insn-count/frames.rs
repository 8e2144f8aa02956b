//! The guest kernel's call chain, followed block by block: a shadow stack of frames, each
//! in a node of a tree of chains. Only calls into module code make nodes (a module
//! function below its caller's node): a call into the kernel image stays in its caller's
//! node, so a node holds a module function's own code and the kernel helpers it calls,
//! and the tree stays as small as the modules' call graph (a kernel's helpers are called
//! from everywhere: lockdep alone would make hundreds of thousands of chains). A far
//! jump into module code (a tail call: an indirect jump, or a direct one past a
//! function's reach) gives the frame a node of the function it lands in, below the
//! frame's caller: a transport's C helper that ends in `jmp *req->execute` hands the
//! rest of the frame to the nvmet core's node.
//!
//! A block that ends in a call pushes a frame for the block that runs next (the callee)
//! whose return lands after the call; a block that ends in a return pops, at the next
//! block, down to the frame whose return address that block starts at (none: a return
//! into code entered before the count began, which changes nothing). An interrupt or
//! exception entry starts a chain of its own above a barrier, which its `iret` removes;
//! a context switch or a system call's entry starts again from the root, since the chain
//! below belongs to another thread or to user space.

use crate::decode::Exit;
use crate::hash::FastMap;

/// The return address of an interrupt's barrier frame (no call returns there).
const BARRIER: u64 = 0;
/// A chain deeper than this has lost its returns (a thread left without them): the
/// bottom half goes.
const MAX_DEPTH: usize = 4096;

struct Frame {
    /// Where the call that made the frame returns to ([`BARRIER`]: an interrupt's).
    ret: u64,
    node: u32,
    /// Whether `node` is the frame's own (its function is module code), not its caller's.
    own: bool,
    /// An interrupt's barrier: how the interrupted block left, which the block after the
    /// `iret` continues.
    interrupted: Exit,
}

pub struct Frames {
    stack: Vec<Frame>,
    /// Node `i`'s parent and function (node 0, the root, has neither).
    nodes: Vec<(u32, u64)>,
    index: FastMap<(u32, u64), u32>,
    /// How the last block left.
    pending: Exit,
    /// The node of code that runs with no frame (entered before the count, or at a new
    /// thread): the root, or a module function it jumped to.
    base: u32,
    /// Whether frames get nodes of their own: not before the first count begins (a boot
    /// runs through more distinct chains than all the counted windows together; its frames
    /// are the root's).
    pub naming: bool,
    /// Code from here up is modules' (the end of the kernel image).
    modules_start: u64,
}

impl Frames {
    pub fn new(modules_start: u64) -> Self {
        Self {
            modules_start,
            stack: Vec::new(),
            nodes: vec![(0, 0)],
            index: FastMap::default(),
            pending: Exit::Other,
            base: 0,
            naming: true,
        }
    }

    fn top(&self) -> u32 {
        self.stack.last().map_or(self.base, |f| f.node)
    }

    fn node(&mut self, parent: u32, func: u64) -> u32 {
        if !self.naming {
            return 0;
        }
        let next = self.nodes.len() as u32;
        let id = *self.index.entry((parent, func)).or_insert(next);
        if id == next {
            self.nodes.push((parent, func));
        }
        id
    }

    fn push(&mut self, frame: Frame) {
        if self.stack.len() >= MAX_DEPTH {
            self.stack.drain(..MAX_DEPTH / 2);
        }
        self.stack.push(frame);
    }

    /// Ordinary code at `vaddr` runs: follows how the last block left; returns the node
    /// the block runs under.
    pub fn enter(&mut self, vaddr: u64) -> u32 {
        if self.pending == Exit::Iret {
            // Back in the interrupted code: its chain, and how its last block left.
            self.pending = Exit::Other;
            while let Some(frame) = self.stack.pop() {
                if frame.ret == BARRIER {
                    self.pending = frame.interrupted;
                    break;
                }
            }
        }
        match std::mem::replace(&mut self.pending, Exit::Other) {
            Exit::Call { ret } => {
                let own = vaddr >= self.modules_start;
                let node = if own {
                    self.node(self.top(), vaddr)
                } else {
                    self.top()
                };
                self.push(Frame {
                    ret,
                    node,
                    own,
                    interrupted: Exit::Other,
                });
            }
            Exit::FarJump if vaddr >= self.modules_start => {
                // A tail call into module code: the rest of the frame is that function's.
                let (node, own) = match self.stack.last() {
                    Some(f) => (f.node, f.own),
                    None => (self.base, self.base != 0),
                };
                let parent = if own { self.nodes[node as usize].0 } else { node };
                let node = self.node(parent, vaddr);
                match self.stack.last_mut() {
                    Some(f) if f.ret != BARRIER => (f.node, f.own) = (node, true),
                    Some(_) => {}
                    None => self.base = node,
                }
            }
            Exit::Ret => {
                if let Some(i) = self
                    .stack
                    .iter()
                    .rposition(|f| f.ret == vaddr || f.ret == BARRIER)
                {
                    if self.stack[i].ret == vaddr {
                        self.stack.truncate(i);
                    }
                }
            }
            Exit::Iret | Exit::FarJump | Exit::Other => {}
        }
        self.top()
    }

    /// An interrupt or exception entry at `vaddr` runs: a chain of its own, above a
    /// barrier that keeps how the interrupted block left.
    pub fn interrupt(&mut self, vaddr: u64) -> u32 {
        let interrupted = std::mem::replace(&mut self.pending, Exit::Other);
        let node = self.node(0, vaddr);
        self.push(Frame {
            ret: BARRIER,
            node,
            own: true,
            interrupted,
        });
        node
    }

    /// A context switch (or a system call's entry) at `vaddr`: the chain starts again.
    pub fn switch(&mut self, vaddr: u64) -> u32 {
        self.stack.clear();
        self.pending = Exit::Other;
        self.base = 0;
        self.node(0, vaddr)
    }

    /// The block that just ran left by `exit`.
    pub fn leave(&mut self, exit: Exit) {
        self.pending = exit;
    }

    /// Frames on the chain now.
    pub fn depth(&self) -> usize {
        self.stack.len()
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Nodes from `start` on: `(id, parent, function)`.
    pub fn nodes_from(&self, start: usize) -> impl Iterator<Item = (usize, u32, u64)> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .skip(start.max(1))
            .map(|(id, &(parent, func))| (id, parent, func))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_returns_and_interrupts() {
        let mut f = Frames::new(0);
        assert_eq!(f.enter(0x100), 0);
        f.leave(Exit::Call { ret: 0x105 });
        let callee = f.enter(0x200);
        assert_ne!(callee, 0);
        // An interrupt between the callee's blocks: a chain of its own.
        f.leave(Exit::Call { ret: 0x210 });
        let irq = f.interrupt(0x900);
        assert_ne!(irq, callee);
        f.leave(Exit::Iret);
        // Back: the pending call of the interrupted block is made.
        let inner = f.enter(0x300);
        assert_eq!(f.nodes[inner as usize], (callee, 0x300));
        f.leave(Exit::Ret);
        assert_eq!(f.enter(0x210), callee);
        f.leave(Exit::Ret);
        assert_eq!(f.enter(0x105), 0);
        // A return into code entered before the count: nothing changes.
        f.leave(Exit::Ret);
        assert_eq!(f.enter(0x555), 0);
        // The same call again is the same node.
        f.leave(Exit::Call { ret: 0x105 });
        assert_eq!(f.enter(0x200), callee);
    }

    #[test]
    fn kernel_helpers_stay_in_their_callers_node() {
        let mut f = Frames::new(0x1000);
        f.leave(Exit::Call { ret: 0x1105 });
        let module_fn = f.enter(0x2000);
        f.leave(Exit::Call { ret: 0x2010 });
        // a kernel-image helper: the module function's node
        assert_eq!(f.enter(0x300), module_fn);
        f.leave(Exit::Call { ret: 0x310 });
        // a module function it calls: a node of its own, below
        let inner = f.enter(0x3000);
        assert_eq!(f.nodes[inner as usize], (module_fn, 0x3000));
        f.leave(Exit::Ret);
        assert_eq!(f.enter(0x310), module_fn);
        f.leave(Exit::Ret);
        assert_eq!(f.enter(0x2010), module_fn);
    }

    #[test]
    fn a_tail_call_into_another_module_is_its_node() {
        let mut f = Frames::new(0x1000);
        f.leave(Exit::Call { ret: 0x1105 });
        let transport = f.enter(0x2000);
        f.leave(Exit::Call { ret: 0x2010 });
        let helper = f.enter(0x2800);
        assert_eq!(f.nodes[helper as usize], (transport, 0x2800));
        // the helper's `jmp *execute`: the core's function, in the helper's place
        f.leave(Exit::FarJump);
        let core = f.enter(0x5000);
        assert_eq!(f.nodes[core as usize], (transport, 0x5000));
        // a kernel-image helper the core calls is the core's
        f.leave(Exit::Call { ret: 0x5010 });
        assert_eq!(f.enter(0x300), core);
        f.leave(Exit::Ret);
        assert_eq!(f.enter(0x5010), core);
        // its return lands in the transport, after the helper's call
        f.leave(Exit::Ret);
        assert_eq!(f.enter(0x2010), transport);
        // a far jump inside the kernel image changes nothing
        f.leave(Exit::FarJump);
        assert_eq!(f.enter(0x400), transport);
    }
}
