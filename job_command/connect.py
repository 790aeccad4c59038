"""The caller's cluster: their kubeconfig (never the stack's state or a stored credential), checked
by one request with scripts/verify's client set-up (verify/kube.py: short timeouts, one clear error)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from job_command.cluster import JobCluster
from verify.kube import ClusterUnreachableError, load_kubeconfig_file
from verify.kube import connect as connect_kube

DEFAULT_KUBECONFIG = Path.home() / ".kube" / "config"


def kubeconfig_path(args: argparse.Namespace) -> str:
    """--kubeconfig, else the first file of $KUBECONFIG, else ~/.kube/config (kubectl's order)."""
    if args.kubeconfig:
        return args.kubeconfig
    listed = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return listed[0] if listed else str(DEFAULT_KUBECONFIG)


def connect(args: argparse.Namespace) -> JobCluster:
    """ClusterUnreachableError (exit 2) when the kubeconfig is unusable or the API refuses it."""
    path = kubeconfig_path(args)
    kube = connect_kube(load_kubeconfig_file(path), args.context, path)
    return JobCluster(kube.api)


__all__ = ["ClusterUnreachableError", "connect", "kubeconfig_path"]
