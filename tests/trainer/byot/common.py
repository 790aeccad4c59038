"""What the test trainers share: hyperparameters from TRAIN_HPARAMS_FILE and synthetic data that
is a function of the step (so a resumed run sees the same batches as an uninterrupted one)."""

from __future__ import annotations

import json
import os
import time

import torch
import yaml


def hparams() -> dict:
    with open(os.environ["TRAIN_HPARAMS_FILE"]) as f:
        return {"steps": 30, "lr": 0.05, "step_delay_s": 0.0, **(yaml.safe_load(f) or {})}


def batch(step: int, rank: int, n: int = 8, dim: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(n, dim, generator=g)
    return x, x.sum(dim=1, keepdim=True)


def report(step: int, loss: float, delay_s: float) -> None:
    if os.environ.get("RANK", "0") == "0":
        print(json.dumps({"event": "test_loss", "step": step, "loss": round(loss, 6)}), flush=True)
    time.sleep(delay_s)


def regression_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, step: int, rank: int, delay_s: float,
                    backward=torch.Tensor.backward) -> None:
    """One SGD step of the loop trainers' linear regression on `batch(step, rank)`, then its loss line
    (`backward`: where the framework wraps it, e.g. Accelerate's `accelerator.backward`)."""
    x, y = batch(step, rank)
    loss = ((model(x) - y) ** 2).mean()
    optimizer.zero_grad()
    backward(loss)
    optimizer.step()
    report(step + 1, loss.item(), delay_s)
