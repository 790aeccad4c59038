"""Shaped like transformers' examples/pytorch/language-modeling/run_clm.py (not a copy):
HfArgumentParser over dataclasses and TrainingArguments from the command line, no hyperparameters
file, `get_last_checkpoint(output_dir)` and `--resume_from_checkpoint` passed to the train call
(the platform's `train` weighs them against its verified choice)."""

import os
import sys
import time
from dataclasses import dataclass, field

import common
import torch
from launcher.integrations.transformers import train  # platform
from transformers import GPT2Config, GPT2LMHeadModel, HfArgumentParser, Trainer, TrainerCallback, TrainingArguments
from transformers.trainer_utils import get_last_checkpoint


@dataclass
class ModelArguments:
    n_embd: int = field(default=16, metadata={"help": "Width of the model built from a config (no weights downloaded)."})
    n_layer: int = field(default=1, metadata={"help": "Number of layers."})


@dataclass
class DataTrainingArguments:
    block_size: int = field(default=16, metadata={"help": "Sequence length of the synthetic tokens."})
    max_train_samples: int = field(default=4096, metadata={"help": "Number of training samples."})
    step_delay_s: float = field(default=0.0, metadata={"help": "Test instrumentation: a pause per step."})


class Tokens(torch.utils.data.Dataset):
    def __init__(self, size, block_size):
        self.size, self.block_size = size, block_size

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        ids = torch.randint(0, 64, (self.block_size,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}


class TestLoss(TrainerCallback):  # test instrumentation: one loss line per step, and a delay
    def __init__(self, delay_s):
        self.delay_s = delay_s

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            common.report(state.global_step, logs["loss"], 0)

    def on_step_end(self, args, state, control, **kwargs):
        time.sleep(self.delay_s)


def main():
    parser = HfArgumentParser((ModelArguments, DataTrainingArguments, TrainingArguments))
    model_args, data_args, training_args = parser.parse_args_into_dataclasses()

    last_checkpoint = None
    if os.path.isdir(training_args.output_dir):
        last_checkpoint = get_last_checkpoint(training_args.output_dir)
        if last_checkpoint is not None and training_args.resume_from_checkpoint is None:
            print(f"Checkpoint detected, resuming training at {last_checkpoint}.", file=sys.stderr)

    torch.manual_seed(training_args.seed)
    config = GPT2Config(vocab_size=64, n_positions=data_args.block_size, n_embd=model_args.n_embd,
                        n_layer=model_args.n_layer, n_head=2)
    trainer = Trainer(model=GPT2LMHeadModel(config), args=training_args,
                      train_dataset=Tokens(data_args.max_train_samples, data_args.block_size),
                      callbacks=[TestLoss(data_args.step_delay_s)])
    checkpoint = training_args.resume_from_checkpoint or last_checkpoint
    train_result = train(trainer, resume_from_checkpoint=checkpoint)  # platform
    trainer.log_metrics("train", train_result.metrics)


if __name__ == "__main__":
    main()
