// Probe: hole 2: maps a buffer into an MR, registers it for remote writes, drops the buffer and keeps the MR (whose key the peer may hold)
// expect: ok

use kernel::prelude::*;

/// Compiles, and is sound since the MR keeps a clone of the buffer it maps until it maps
/// another one or is deregistered: dropping `buf` here frees nothing the registration
/// reaches. (Before, the buffer was unmapped and freed under the registered MR.)
fn hole2_mr_outlives_buffer(
    qp: &crate::rdma::Qp<'_>,
    device: &crate::rdma::Device,
    pd: &kernel::sync::Arc<crate::rdma::Pd>,
) -> Result<crate::rdma::Mr> {
    let buf = crate::rdma::DmaBuf::new(device, 4096)?;
    let mr = crate::rdma::Mr::new(pd, buf.pages(0, 4096))?;
    mr.map(&buf, 0, 4096)?;
    let access = crate::rdma::access::LOCAL_WRITE | crate::rdma::access::REMOTE_WRITE;
    qp.post_send(crate::rdma::SendOp::Register { mr: &mr, access }, |_| {})?;
    drop(buf);
    Ok(mr)
}
