// Probe: hole 5: keeps an `OpsRef` (which requests store in `nvmet_req.ops`) past its table's drop
// expect: E0597

fn ops_ref_outlives_table(
    ops: crate::nvmet::transport::Ops<crate::target::NvmetRdma>,
) -> crate::nvmet::OpsRef<crate::target::NvmetRdma> {
    ops.handle()
}
