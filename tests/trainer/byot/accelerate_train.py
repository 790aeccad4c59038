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
    common.regression_step(model, optimizer, step, accelerator.process_index, hp["step_delay_s"],
                           backward=accelerator.backward)
