"""A PyTorch Lightning module and Trainer."""

import common
import lightning as L  # noqa: N812  # as Lightning's own docs write it
import torch
from launcher.integrations.lightning import fit, trainer_kwargs  # platform

hp = common.hparams()


class Steps(torch.utils.data.Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, i):
        return common.batch(i, 0, n=1)


class Regression(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = ((self.layer(x.squeeze(1)) - y.squeeze(1)) ** 2).mean()
        common.report(self.global_step + 1, loss.item(), hp["step_delay_s"])
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=hp["lr"])


torch.manual_seed(0)
trainer = L.Trainer(max_steps=hp["steps"], accelerator="cpu", logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, **trainer_kwargs())  # platform
fit(trainer, Regression(), train_dataloaders=torch.utils.data.DataLoader(Steps(), batch_size=8))  # platform
