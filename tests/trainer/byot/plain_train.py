"""A plain torchrun DDP loop."""

import common
import torch
import torch.distributed as dist
from launcher.integrations.plain import Run  # platform

hp = common.hparams()
dist.init_process_group("gloo")
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=hp["lr"])
for step in Run(model=model, optimizer=optimizer).steps(hp["steps"]):  # platform
    common.regression_step(model, optimizer, step, dist.get_rank(), hp["step_delay_s"])
