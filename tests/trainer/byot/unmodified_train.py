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
    x, y = common.batch(step, dist.get_rank())
    loss = ((model(x) - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    common.report(step + 1, loss.item(), hp["step_delay_s"])
