"""The quick start's trainer (docs/bring-your-own-trainer.md): a DDP regression on synthetic data."""
import argparse
import time

import torch
import torch.distributed as dist
from launcher.integrations.plain import Run  # platform

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=300)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--sleep", type=float, default=0.1, help="seconds per step: time to press Ctrl-C")
args = parser.parse_args()

dist.init_process_group("gloo")
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
for step in Run(model=model, optimizer=optimizer).steps(args.steps):  # platform
    x = torch.randn(32, 8, generator=torch.Generator().manual_seed(100 * step + dist.get_rank()))
    loss = ((model(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    time.sleep(args.sleep)
