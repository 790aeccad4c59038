"""A Lightning script as its upstream examples write it, without a line of platform code: no
`num_nodes`, so under torchrun each worker would train alone (the launcher's gang check stops it)."""

import common
import lightning as L  # noqa: N812  # as Lightning's own docs write it
import torch
from tiny_lightning import Regression

data = torch.utils.data.TensorDataset(*common.batch(0, 0, n=64))
trainer = L.Trainer(max_epochs=2, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False)
trainer.fit(Regression(lr=0.05), torch.utils.data.DataLoader(data, batch_size=4))
print("trained alone")
