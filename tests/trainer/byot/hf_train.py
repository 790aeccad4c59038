"""A Hugging Face Trainer over a tiny GPT-2 built from a config (no weights downloaded)."""

import os

import common
import tiny_hf
from launcher.integrations.transformers import train  # platform
from transformers import Trainer

hp = common.hparams()
args = tiny_hf.training_args(os.environ["TRAIN_CHECKPOINT_DIR"], hp, save_strategy="steps", save_steps=5, seed=0)
trainer = Trainer(model=tiny_hf.gpt2(), args=args, train_dataset=tiny_hf.Tokens(4096),
                  callbacks=[tiny_hf.TestLoss(hp["step_delay_s"], at_step_end=True)])
train(trainer)  # platform
