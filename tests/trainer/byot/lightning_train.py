"""A PyTorch Lightning module and Trainer."""

import common
import lightning as L  # noqa: N812  # as Lightning's own docs write it
import torch
from launcher.integrations.lightning import fit, trainer_kwargs  # platform
from tiny_lightning import Regression

hp = common.hparams()


class Steps(torch.utils.data.Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, i):
        return common.batch(i, 0, n=1)


torch.manual_seed(0)
trainer = L.Trainer(max_steps=hp["steps"], accelerator="cpu", logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, **trainer_kwargs())  # platform
model = Regression(hp["lr"], report_delay_s=hp["step_delay_s"])
fit(trainer, model, train_dataloaders=torch.utils.data.DataLoader(Steps(), batch_size=8))  # platform
