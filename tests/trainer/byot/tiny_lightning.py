"""What the Lightning test trainers share: a LightningModule of a linear regression on
`common.batch` data."""

from __future__ import annotations

import common
import lightning as L  # noqa: N812  # as Lightning's own docs write it
import torch


class Regression(L.LightningModule):
    """`report_delay_s` given: test instrumentation, a test_loss line per step and that delay."""

    def __init__(self, lr: float, report_delay_s: float | None = None):
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)
        self.lr, self.report_delay_s = lr, report_delay_s

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        if self.report_delay_s is not None:
            common.report(self.global_step + 1, loss.item(), self.report_delay_s)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)
