"""Shaped like Lightning's examples/pytorch/basics/transformer.py (not a copy): an argparse CLI,
a LightningModule, train and validation DataLoaders given to `fit` positionally, epochs, no
hyperparameters file."""

import argparse

import common
import lightning as L  # noqa: N812  # as Lightning's own docs write it
import torch
from launcher.integrations.lightning import fit, trainer_kwargs  # platform
from tiny_lightning import Regression
from torch.utils.data import DataLoader, Dataset


class Samples(Dataset):
    def __init__(self, size, offset=0):
        self.size, self.offset = size, offset

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        x, y = common.batch(self.offset + index, 0, n=1)
        return x[0], y[0]


class LightningRegression(Regression):
    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.layer(x), y), sync_dist=True)


def main(args):
    train_dataloader = DataLoader(Samples(64), batch_size=4)
    val_dataloader = DataLoader(Samples(16, offset=10_000), batch_size=4)
    model = LightningRegression(args.lr, report_delay_s=args.step_delay_s)
    trainer = L.Trainer(max_epochs=args.max_epochs, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, **trainer_kwargs())  # platform
    fit(trainer, model, train_dataloader, val_dataloader)  # platform


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Lightning regression")
    parser.add_argument("--max_epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--step_delay_s", type=float, default=0.0, help="test instrumentation: a pause per step")
    main(parser.parse_args())
