"""Reference trainer for the launcher contract (see trainer/README.md)."""
