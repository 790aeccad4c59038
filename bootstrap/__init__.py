"""The one-time program that holds the Pulumi state and the CI identity (see docs/delivery.md)."""
