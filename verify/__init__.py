"""Go-live verification of a deployed stack (scripts/verify, docs/verify.md).

report (results, rendering) <- stack_outputs (what the stack promised) <- kube (the live API)
<- progress_log, nccl_output, nccl_reference (pure) <- checks <- nccl_job <- cli.
"""
