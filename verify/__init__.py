"""Go-live verification of a deployed stack (scripts/verify, docs/verify.md).

report (results, rendering) <- stack_outputs (what the stack promised) <- kube (the live API)
<- progress_log, nccl_output, nccl_reference (pure) <- checks <- nccl_job <- cli.

From the program it imports only pure modules (pool labels and resources, the image-digest rule),
never a Pulumi component: it checks what a stack deployed, it does not build one.
"""
