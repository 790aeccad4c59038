"""A Hugging Face Trainer script without a line of platform code (liveness comes from the launcher)."""

import os

import common
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

hp = common.hparams()


class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, i):
        ids = torch.randint(0, 64, (16,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}


class TestLoss(TrainerCallback):  # test instrumentation: one loss line per step, and a delay
    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            common.report(state.global_step, logs["loss"], hp["step_delay_s"])


torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2))
args = TrainingArguments(output_dir=os.path.join(os.environ["TRAIN_CHECKPOINT_DIR"], "hf"), max_steps=hp["steps"],
                         learning_rate=hp["lr"], per_device_train_batch_size=4, logging_steps=1, save_strategy="no",
                         use_cpu=True, report_to="none", dataloader_num_workers=0, disable_tqdm=True)
Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[TestLoss()]).train()
