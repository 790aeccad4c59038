"""A Hugging Face Accelerate loop."""

import common
import torch
from accelerate import Accelerator
from launcher.integrations.accelerate import Run  # platform

hp = common.hparams()
accelerator = Accelerator(cpu=True)
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=hp["lr"])
model, optimizer = accelerator.prepare(model, optimizer)
for step in Run(accelerator).steps(hp["steps"]):  # platform
    x, y = common.batch(step, accelerator.process_index)
    loss = ((model(x) - y) ** 2).mean()
    optimizer.zero_grad()
    accelerator.backward(loss)
    optimizer.step()
    common.report(step + 1, loss.item(), hp["step_delay_s"])
