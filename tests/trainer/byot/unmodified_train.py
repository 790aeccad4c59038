"""A plain torchrun DDP loop without a line of platform code (liveness comes from the launcher)."""

import common
import torch
import torch.distributed as dist

hp = common.hparams()
dist.init_process_group("gloo")
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=hp["lr"])
for step in range(hp["steps"]):
    common.regression_step(model, optimizer, step, dist.get_rank(), hp["step_delay_s"])
