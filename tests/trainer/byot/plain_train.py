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
    x, y = common.batch(step, dist.get_rank())
    loss = ((model(x) - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    common.report(step + 1, loss.item(), hp["step_delay_s"])
