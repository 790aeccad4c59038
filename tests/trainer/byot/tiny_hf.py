"""What the Hugging Face Trainer test trainers share: a tiny GPT-2 built from a config (no weights
downloaded), token data that is a function of the index, the Trainer settings for one CPU process,
and the test instrumentation (a test_loss line per step, and a delay)."""

from __future__ import annotations

import time

import common
import torch
from transformers import GPT2Config, GPT2LMHeadModel, TrainerCallback, TrainingArguments


class Tokens(torch.utils.data.Dataset):
    def __init__(self, length: int):
        self.length = length

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        ids = torch.randint(0, 64, (16,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}


def gpt2() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2))


def training_args(output_dir: str, hp: dict, **kwargs) -> TrainingArguments:
    return TrainingArguments(output_dir=output_dir, max_steps=hp["steps"], learning_rate=hp["lr"],
                             per_device_train_batch_size=4, logging_steps=1, use_cpu=True, report_to="none",
                             dataloader_num_workers=0, disable_tqdm=True, **kwargs)


class TestLoss(TrainerCallback):
    """A loss line per logged step, and `delay_s` of sleep: after the line, or, `at_step_end`, at
    each step's end (before the Trainer logs and saves that step)."""

    def __init__(self, delay_s: float, at_step_end: bool = False):
        self.delay_s, self.at_step_end = delay_s, at_step_end

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            common.report(state.global_step, logs["loss"], 0 if self.at_step_end else self.delay_s)

    def on_step_end(self, args, state, control, **kwargs):
        if self.at_step_end:
            time.sleep(self.delay_s)
