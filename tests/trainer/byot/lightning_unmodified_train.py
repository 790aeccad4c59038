"""A Lightning script as its upstream examples write it, without a line of platform code: no
`num_nodes`, so under torchrun each worker would train alone (the launcher's gang check stops it)."""

import common
import lightning as L  # noqa: N812  # as Lightning's own docs write it
import torch


class Regression(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


data = torch.utils.data.TensorDataset(*common.batch(0, 0, n=64))
trainer = L.Trainer(max_epochs=2, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False)
trainer.fit(Regression(), torch.utils.data.DataLoader(data, batch_size=4))
print("trained alone")
