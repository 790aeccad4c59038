"""`gpu-training job`: a team's ad-hoc training jobs, checked like a stack's (docs/run-your-first-job.md)."""
