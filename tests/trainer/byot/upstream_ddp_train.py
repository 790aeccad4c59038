"""Shaped like pytorch/examples distributed/ddp-tutorial-series/multinode.py (not a copy): an
argparse CLI, a Trainer class, a DistributedSampler and an epoch loop, no hyperparameters file.
The platform's 2 lines wrap the epoch loop; the trainer's own snapshot files are left out."""

import argparse

import common
import torch
import torch.nn.functional as F  # noqa: N812  # as the upstream examples write it
from launcher.integrations.plain import Run  # platform
from torch.distributed import destroy_process_group, get_rank, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: N817
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class MyTrainDataset(Dataset):
    def __init__(self, size):
        self.data = [common.batch(i, 0, n=1) for i in range(size)]

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        x, y = self.data[index]
        return x[0], y[0]


class Trainer:
    def __init__(self, model, train_data, optimizer, step_delay_s):
        self.model = DDP(model)
        self.train_data = train_data
        self.optimizer = optimizer
        self.step_delay_s = step_delay_s

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        loss = F.mse_loss(self.model(source), targets)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch):
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            loss = self._run_batch(source, targets)
        return loss

    def train(self, max_epochs):
        for epoch in Run(model=self.model, optimizer=self.optimizer).steps(max_epochs):  # platform
            loss = self._run_epoch(epoch)
            common.report(epoch + 1, loss, self.step_delay_s)


def main(total_epochs, batch_size, lr, step_delay_s):
    init_process_group(backend="gloo")
    torch.manual_seed(get_rank())
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    train_data = DataLoader(MyTrainDataset(32), batch_size=batch_size, shuffle=False,
                            sampler=DistributedSampler(MyTrainDataset(32)))
    Trainer(model, train_data, optimizer, step_delay_s).train(total_epochs)
    destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="simple distributed training job")
    parser.add_argument("total_epochs", type=int, help="Total epochs to train the model")
    parser.add_argument("--batch_size", default=4, type=int, help="Input batch size on each device (default: 4)")
    parser.add_argument("--lr", default=0.05, type=float)
    parser.add_argument("--step_delay_s", default=0.0, type=float, help="test instrumentation: a pause per epoch")
    args = parser.parse_args()
    main(args.total_epochs, args.batch_size, args.lr, args.step_delay_s)
